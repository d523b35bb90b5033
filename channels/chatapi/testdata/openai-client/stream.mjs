// Streamed chat completions with the official client: a first one that
// warms the client up (its stream parser compiled, its connection open),
// then SB_STREAMS (default 1) measured ones. Prints, as one JSON line, each
// measured stream's content chunks with the wall-clock time each arrived
// (ms since the epoch, fractional), its finish reason and usage.
import { client } from "./gateway.mjs";

const now = () => performance.timeOrigin + performance.now();
const ask = (user, content) =>
  client.chat.completions.create({
    model: "switchboard",
    user,
    stream: true,
    stream_options: { include_usage: true },
    messages: [{ role: "user", content }],
  });

for await (const _ of await ask("node-warm", "Warm up."));

const runs = [];
for (let i = 0; i < Number(process.env.SB_STREAMS || 1); i++) {
  const stream = await ask("node-stream", "Tell me something, streamed.");
  const chunks = [];
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      if (c.delta?.content) chunks.push({ at: now(), content: c.delta.content });
      if (c.finish_reason) finish = c.finish_reason;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  runs.push({ chunks, finish, total: usage?.total_tokens });
}
console.log(JSON.stringify({ runs }));
