// @ts-check
// The client against protocol/openrpc.json, with no process: every method of the document
// has a client method and the other way round, every error code a class, and the
// generated types are current.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import test from "node:test";
import { CLIENT_METHODS, ConvoClient, ConvoError, ERROR_CLASSES, METHOD_NAMES, TARGETS, errorFromReply } from "convo";
import { DOCUMENT, OUTPUT, generate } from "../scripts/gen-protocol.mjs";
import { clientManifest, platformManifest } from "../pack.mjs";

const document = JSON.parse(readFileSync(DOCUMENT, "utf8"));
const documented = document.methods.map((/** @type {{name: string}} */ m) => m.name);

test("src/protocol.ts is what the generator makes of openrpc.json (else: npm run gen)", () => {
  assert.equal(readFileSync(OUTPUT, "utf8"), generate(document));
});

test("the notifications with params in openrpc.json have their types, session/changed among them", () => {
  /** @type {{name: string, params?: object}[]} */
  const notifications = document["x-notifications"];
  const described = notifications.filter((n) => n.params).map((n) => n.name);
  assert.ok(described.includes("session/changed"));
  const text = readFileSync(OUTPUT, "utf8");
  for (const name of described) assert.match(text, new RegExp(`^  ${JSON.stringify(name)}: \\w+Params;$`, "m"), name);
  // What subscribe() yields: the params of session/changed.
  /** @type {import("convo").SessionChange} */
  const change = { subscription_id: "sub-1", session_id: "s", revision: 1, change: "appended", message_count: 1 };
  assert.equal(change.change, "appended");
});

test("every method in openrpc.json has a client method, and no client method lacks one", () => {
  assert.deepEqual([...METHOD_NAMES], documented);
  assert.deepEqual(Object.keys(CLIENT_METHODS).sort(), [...documented].sort());
  const proto = /** @type {Record<string, unknown>} */ (/** @type {unknown} */ (ConvoClient.prototype));
  for (const [method, name] of Object.entries(CLIENT_METHODS)) {
    assert.equal(typeof proto[name], "function", `${method} → ${name}`);
  }
  // Every public method of the client is a protocol method or one of these (subscribe:
  // session/subscribe and unsubscribe as an async iterator of session/changed).
  const own = Object.getOwnPropertyNames(ConvoClient.prototype).filter(
    (n) => n !== "constructor" && typeof Object.getOwnPropertyDescriptor(ConvoClient.prototype, n)?.value === "function",
  );
  const lifecycle = ["request", "subscribe", "dispose"];
  assert.deepEqual(own.filter((n) => !lifecycle.includes(n)).sort(), Object.values(CLIENT_METHODS).sort());
});

test("every error code in openrpc.json has its ConvoError subclass, with its kind", () => {
  const errors = Object.values(document.components.errors);
  assert.deepEqual(Object.keys(ERROR_CLASSES).sort(), errors.map((e) => String(e.code)).sort());
  for (const e of errors) {
    const err = errorFromReply(e.code, e.message, e.data ? { kind: e.data.properties.kind.const } : undefined);
    assert.ok(err instanceof ConvoError && err.constructor !== ConvoError, `${e.code} has a subclass`);
    assert.equal(err.code, e.code);
    assert.equal(err.kind, e.data?.properties.kind.const ?? err.kind);
    assert.match(err.kind, /^[a-z_]+$/);
    assert.equal(err.name, err.constructor.name);
  }
  const other = errorFromReply(4242, "something new", { kind: "new_kind" });
  assert.equal(other.constructor, ConvoError);
  assert.equal(other.kind, "new_kind");
});

test("the published manifests: one optional dependency per platform package, with its os, cpu and libc", () => {
  const client = clientManifest();
  assert.equal(client.private, undefined);
  assert.equal(client.devDependencies, undefined);
  assert.deepEqual(Object.keys(client.optionalDependencies), TARGETS.map((t) => `@convo/${t.name}`));
  assert.ok(Object.values(client.optionalDependencies).every((v) => v === client.version));
  const gnu = platformManifest(TARGETS.find((t) => t.name === "linux-x64-gnu"));
  assert.deepEqual([gnu.name, gnu.os, gnu.cpu, gnu.libc, gnu.files], ["@convo/linux-x64-gnu", ["linux"], ["x64"], ["glibc"], ["bin/convo", "README.md"]]);
  const mac = platformManifest(TARGETS.find((t) => t.name === "darwin-arm64"));
  assert.equal(mac.libc, undefined);
  assert.equal(/** @type {any} */ (mac).scripts, undefined, "no install scripts: nothing is downloaded");
});
