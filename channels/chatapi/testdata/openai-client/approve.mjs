// An approval through the official client: the paused request's answer
// carries the question (content, and the switchboard_approval field the
// client passes through), and a streamed "yes" gets the resumed turn's
// reply. Prints what it got as one JSON line.
import { client } from "./gateway.mjs";

const user = "node-approver";
const out = {};

const r = await client.chat.completions.create({
  model: "switchboard",
  user,
  messages: [{ role: "user", content: "delete old.txt" }],
});
out.question = r.choices[0].message.content;
out.approval = r.switchboard_approval;

const stream = await client.chat.completions.create({
  model: "switchboard",
  user,
  stream: true,
  messages: [{ role: "user", content: "yes" }],
});
let answer = "";
for await (const chunk of stream) {
  for (const c of chunk.choices) {
    if (c.delta?.content) answer += c.delta.content;
  }
}
out.answer = answer;

console.log(JSON.stringify(out));
