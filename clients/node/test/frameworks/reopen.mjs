// @ts-check
// Run by the framework tests in a new Node process: opens the adapter on a store and
// prints what it reads (bytes and URLs tagged, see helpers.mjs), as a host restarted
// after a crash would see it. Usage: node reopen.mjs openai-agents|ai-sdk SESSION_ID STORE
import { toJson } from "./helpers.mjs";

const [adapter, sessionId, store] = process.argv.slice(2);
if (!sessionId || !store) throw new Error("usage: node reopen.mjs openai-agents|ai-sdk SESSION_ID STORE");
if (adapter === "openai-agents") {
  const { ConvoSession } = await import("convo/openai-agents");
  const session = new ConvoSession({ sessionId, store });
  process.stdout.write(toJson(await session.getItems()));
  await session.close();
} else if (adapter === "ai-sdk") {
  const { ConvoChatHistory } = await import("convo/ai-sdk");
  const history = await ConvoChatHistory.open({ sessionId, store });
  process.stdout.write(toJson(await history.load()));
  await history.close();
} else {
  throw new Error(`unknown adapter ${adapter}`);
}
