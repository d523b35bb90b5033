// Talks to Switchboard's OpenAI-compatible API with the official client,
// not streaming and streaming, and prints what it got as one JSON line.
import OpenAI from "openai";
import { client } from "./gateway.mjs";

const user = "node-user";
const out = {};

const models = await client.models.list();
out.models = models.data.map((m) => m.id);

const r = await client.chat.completions.create({
  model: out.models[0],
  user,
  messages: [
    { role: "system", content: "ignored by the gateway" },
    { role: "user", content: "What time is it?" },
  ],
});
out.plain = {
  id: r.id,
  content: r.choices[0].message.content,
  role: r.choices[0].message.role,
  finish: r.choices[0].finish_reason,
  total: r.usage?.total_tokens,
};

const stream = await client.chat.completions.create({
  model: out.models[0],
  user,
  stream: true,
  stream_options: { include_usage: true },
  messages: [{ role: "user", content: [{ type: "text", text: "And now, streamed?" }] }],
});
let content = "";
let finish = null;
let usage = null;
let chunks = 0;
for await (const chunk of stream) {
  chunks++;
  for (const c of chunk.choices) {
    if (c.delta?.content) content += c.delta.content;
    if (c.finish_reason) finish = c.finish_reason;
  }
  if (chunk.usage) usage = chunk.usage;
}
out.stream = { content, finish, total: usage?.total_tokens, chunks };

try {
  await new OpenAI({ baseURL: process.env.SB_BASE_URL, apiKey: "wrong", maxRetries: 0 }).models.list();
  out.wrongKey = "accepted";
} catch (e) {
  out.wrongKey = e.status;
}

console.log(JSON.stringify(out));
