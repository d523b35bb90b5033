// One streamed chat completion with the official client: prints each
// content chunk with the wall-clock time it arrived (ms since the epoch,
// fractional), then the usage, as one JSON line.
import OpenAI from "openai";

const client = new OpenAI({
  baseURL: process.env.SB_BASE_URL,
  apiKey: process.env.SB_TOKEN,
  maxRetries: 0,
  timeout: 30_000,
});
const now = () => performance.timeOrigin + performance.now();
const stream = await client.chat.completions.create({
  model: "switchboard",
  user: "node-stream",
  stream: true,
  stream_options: { include_usage: true },
  messages: [{ role: "user", content: "Tell me something, streamed." }],
});
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
console.log(JSON.stringify({ chunks, finish, total: usage?.total_tokens }));
