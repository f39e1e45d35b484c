// The sessions view's model against the real binary: paging through session/list, forks
// under their parents, labels.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { lib, startClient } from "./helpers.mjs";

const { SessionsModel, sessionLabel, sessionDescription, firstUserLine } = lib;

let convo;
before(async () => (convo = await startClient()));
after(() => convo.end());

const list = (client) => (params) => client.listSessions(params);
const ids = (sessions) => sessions.map((s) => s.session_id);

describe("sessions view model", () => {
  test("pages through session/list in its order, a page at a time", async () => {
    const { client } = await startClient("memory");
    try {
      for (let i = 0; i < 7; i++) await client.createSession({ session_id: `s${i}`, title: `session ${i}` });
      const all = ids((await client.listSessions({ limit: 100 })).sessions);
      assert.deepEqual(all, ["s6", "s5", "s4", "s3", "s2", "s1", "s0"]);
      const model = new SessionsModel(list(client), 3);
      assert.equal(model.loaded, false);
      await model.ensureLoaded();
      assert.deepEqual(ids(model.roots()), all.slice(0, 3));
      assert.equal(model.hasMore, true);
      await model.loadMore();
      assert.deepEqual(ids(model.roots()), all.slice(0, 6));
      await model.loadMore();
      assert.deepEqual(ids(model.roots()), all);
      assert.equal(model.hasMore, false);
      await model.loadMore(); // nothing more: no change
      assert.deepEqual(ids(model.sessions), all);
    } finally {
      await client.dispose();
    }
  });

  test("a reload keeps as many sessions as were shown, the new ones first", async () => {
    const { client } = await startClient("memory");
    try {
      for (let i = 0; i < 7; i++) await client.createSession({ session_id: `s${i}` });
      const model = new SessionsModel(list(client), 3);
      await model.ensureLoaded();
      await model.loadMore();
      assert.equal(model.sessions.length, 6);
      await client.createSession({ session_id: "new" });
      await client.deleteSession({ session_id: "s4" });
      await model.reload();
      assert.deepEqual(ids(model.sessions), ["new", "s6", "s5", "s3", "s2", "s1"]);
      assert.equal(model.hasMore, true);
    } finally {
      await client.dispose();
    }
  });

  test("forks sit under their parent once it is loaded, at the top before", async () => {
    const { client } = await startClient("memory");
    try {
      await client.createSession({ session_id: "parent" });
      const { message_id } = await client.addUser({ session_id: "parent", text: "hello" });
      await client.addAssistant({ session_id: "parent", text: "hi" });
      await client.fork({ session_id: "parent", new_session_id: "fork-a", at_message_id: message_id });
      await client.fork({ session_id: "parent", new_session_id: "fork-b" });
      await client.fork({ session_id: "fork-a", new_session_id: "fork-a-1" });
      await client.createSession({ session_id: "other" });

      const model = new SessionsModel(list(client), 2);
      await model.ensureLoaded(); // other, fork-a-1: fork-a is not loaded yet
      assert.deepEqual(ids(model.roots()), ["other", "fork-a-1"]);
      await model.loadMore(); // fork-b, fork-a: fork-a-1 moves under fork-a
      assert.deepEqual(ids(model.roots()), ["other", "fork-b", "fork-a"]);
      assert.deepEqual(ids(model.children("fork-a")), ["fork-a-1"]);
      await model.loadMore(); // parent
      assert.deepEqual(ids(model.roots()), ["other", "parent"]);
      assert.deepEqual(ids(model.children("parent")), ["fork-b", "fork-a"]);
      assert.deepEqual(ids(model.children("fork-a")), ["fork-a-1"]);
      assert.equal(model.parentOf(model.get("fork-a-1")), "fork-a");
      assert.equal(model.parentOf(model.get("parent")), undefined);
      // A parent deleted: its forks keep their history and rise to the top.
      await client.deleteSession({ session_id: "parent" });
      await model.reload();
      assert.deepEqual(ids(model.roots()), ["other", "fork-b", "fork-a"]);
    } finally {
      await client.dispose();
    }
  });

  test("labels: the title, else the first user line, else the id", async () => {
    const { client } = convo;
    const titled = await client.createSession({ title: "  Trip planning  " });
    const untitled = await client.createSession({ system: "terse" });
    await client.addAssistant({ session_id: untitled.session_id, text: "Hello! How can I help?" });
    await client.addUser({ session_id: untitled.session_id, text: "\n\n  Where is the Louvre?  \nAnd when does it open?" });
    const empty = await client.createSession({});
    const model = new SessionsModel(list(client), 50, async (id) => (await client.history({ session_id: id, limit: 8, repair: false })).messages);
    await model.ensureLoaded();
    assert.equal(sessionLabel(model.get(titled.session_id)), "Trip planning");
    const line = await model.firstLine(untitled.session_id);
    assert.equal(line, "Where is the Louvre?");
    assert.equal(sessionLabel(model.get(untitled.session_id), line), "Where is the Louvre?");
    assert.equal(sessionLabel(model.get(empty.session_id), await model.firstLine(empty.session_id)), empty.session_id);
    assert.equal(firstUserLine([{ role: "user", content: "x".repeat(100) }]).length, 80);
    const info = await client.getSession({ session_id: untitled.session_id });
    assert.equal(sessionDescription(info), "2 messages");
    assert.equal(sessionDescription({ ...info, message_count: 1, usage: { input_tokens: 1200, output_tokens: 34 } }), "1 message · 1,234 tokens");
  });
});
