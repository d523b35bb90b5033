// The official client aimed at the gateway under test (SB_BASE_URL,
// SB_TOKEN), shared by the scripts.
import OpenAI from "openai";

export const client = new OpenAI({
  baseURL: process.env.SB_BASE_URL,
  apiKey: process.env.SB_TOKEN,
  maxRetries: 0,
  timeout: 30_000,
});
