// @ts-check
// One npm package per platform (the protocol's section 14), with no convo process: which
// package this machine needs (glibc or musl, convo.exe on Windows), the error naming the
// one that is missing, and packing every platform package from a folder of binaries. The
// lookup runs through resolveBinary itself, on packages laid out in a temporary
// node_modules; the C library through detectLibc with its probes replaced.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import { ConvoClient, TARGETS, detectLibc, packageName, resolveBinary } from "convo";
import { checkBinary, executableKind, findBinaries, packAll } from "../pack.mjs";

const GLIBC_LDD = "#!/bin/bash\n# Copyright (C) 1996-2022 Free Software Foundation, Inc.\n# This file is part of the GNU C Library.\n";
const MUSL_LDD = '#!/bin/sh\nexec /lib/ld-musl-x86_64.so.1 --list "$@"\n';
const noLdd = () => undefined;
/** @param {string} text */
const ldd = (text) => (/** @type {string} */ path) => (path === "/usr/bin/ldd" ? text : undefined);

/** A temporary folder, removed after the test. @param {import("node:test").TestContext} t */
function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), "convo-platforms-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * Installs a platform package by hand into `root`/node_modules, as npm lays it out.
 * @param {string} root @param {string} name the target name @param {string[]} files under the package
 */
function install(root, name, files) {
  const dir = join(root, "node_modules", "@convo", name);
  mkdirSync(join(dir, "bin"), { recursive: true });
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: `@convo/${name}`, version: "0.1.0" }));
  for (const f of files) writeFileSync(join(dir, f), "");
  return dir;
}

test("the platform packages are the seven of the protocol's table, each for its Rust target", () => {
  assert.deepEqual(
    TARGETS.map((t) => [packageName(t), t.rust]),
    [
      ["@convo/linux-x64-gnu", "x86_64-unknown-linux-gnu"],
      ["@convo/linux-arm64-gnu", "aarch64-unknown-linux-gnu"],
      ["@convo/linux-x64-musl", "x86_64-unknown-linux-musl"],
      ["@convo/linux-arm64-musl", "aarch64-unknown-linux-musl"],
      ["@convo/darwin-x64", "x86_64-apple-darwin"],
      ["@convo/darwin-arm64", "aarch64-apple-darwin"],
      ["@convo/win32-x64", "x86_64-pc-windows-gnu"],
    ],
  );
});

test("the C library: CONVO_LIBC when set, then /usr/bin/ldd, then Node's report", () => {
  const glibcReport = () => ({ header: { glibcVersionRuntime: "2.36" }, sharedObjects: ["/lib/x86_64-linux-gnu/libc.so.6"] });
  const muslReport = () => ({ header: {}, sharedObjects: ["/lib/ld-musl-x86_64.so.1"] });
  /** @type {[string, import("convo").LibcProbes, string][]} [why, probes, expected] */
  const cases = [
    ["glibc's ldd", { env: {}, readFile: ldd(GLIBC_LDD), report: muslReport }, "glibc"],
    ["musl's ldd", { env: {}, readFile: ldd(MUSL_LDD), report: glibcReport }, "musl"],
    ["no ldd, a glibc Node", { env: {}, readFile: noLdd, report: glibcReport }, "glibc"],
    ["no ldd, a Node on musl", { env: {}, readFile: noLdd, report: muslReport }, "musl"],
    ["no ldd, a report without glibcVersionRuntime", { env: {}, readFile: noLdd, report: () => ({ header: {} }) }, "musl"],
    ["nothing tells", { env: {}, readFile: noLdd, report: () => undefined }, "glibc"],
    ["an ldd that says neither, then the report", { env: {}, readFile: ldd("#!/bin/sh\n"), report: muslReport }, "musl"],
    ["forced musl on a glibc machine", { env: { CONVO_LIBC: "musl" }, readFile: ldd(GLIBC_LDD), report: glibcReport }, "musl"],
    ["forced glibc on a musl machine", { env: { CONVO_LIBC: "glibc" }, readFile: ldd(MUSL_LDD), report: muslReport }, "glibc"],
  ];
  for (const [why, probes, expected] of cases) assert.equal(detectLibc(probes), expected, why);
  assert.throws(() => detectLibc({ env: { CONVO_LIBC: "uclibc" } }), /CONVO_LIBC is "uclibc": it can be glibc or musl/);
});

test("the C library of this machine is the one Node itself is linked against", { skip: process.platform !== "linux" }, () => {
  const header = /** @type {{ header: { glibcVersionRuntime?: string } }} */ (process.report.getReport()).header;
  assert.equal(detectLibc({ env: {} }), header.glibcVersionRuntime ? "glibc" : "musl");
});

test("on Linux the package for the C library is chosen, glibc or musl, and CONVO_LIBC forces it", (t) => {
  const root = tempDir(t);
  const gnu = install(root, "linux-x64-gnu", ["bin/convo"]);
  const musl = install(root, "linux-x64-musl", ["bin/convo"]);
  const linux = { platform: /** @type {const} */ ("linux"), arch: "x64", paths: [root] };
  const glibcReport = () => ({ header: { glibcVersionRuntime: "2.36" } });
  assert.equal(resolveBinary({ ...linux, env: {}, libcProbes: { readFile: ldd(GLIBC_LDD) } }), join(gnu, "bin/convo"));
  assert.equal(resolveBinary({ ...linux, env: {}, libcProbes: { readFile: ldd(MUSL_LDD) } }), join(musl, "bin/convo"));
  assert.equal(resolveBinary({ ...linux, env: {}, libcProbes: { readFile: noLdd, report: glibcReport } }), join(gnu, "bin/convo"));
  // Forced through the environment: the way to run the musl package on a glibc machine.
  assert.equal(resolveBinary({ ...linux, env: { CONVO_LIBC: "musl" }, libcProbes: { readFile: ldd(GLIBC_LDD) } }), join(musl, "bin/convo"));
  assert.equal(resolveBinary({ ...linux, env: { CONVO_LIBC: "glibc" }, libcProbes: { readFile: ldd(MUSL_LDD) } }), join(gnu, "bin/convo"));
  assert.equal(resolveBinary({ ...linux, env: {}, libc: "musl" }), join(musl, "bin/convo"));
  // The binary option and CONVO_BINARY come first, whatever is installed.
  assert.equal(resolveBinary({ ...linux, binary: "/a/convo", env: { CONVO_BINARY: "/b/convo" } }), "/a/convo");
  assert.equal(resolveBinary({ ...linux, env: { CONVO_BINARY: "/b/convo", CONVO_LIBC: "musl" } }), "/b/convo");
});

test("on Windows the binary is bin/convo.exe of @convo/win32-x64", (t) => {
  const root = tempDir(t);
  const win = install(root, "win32-x64", ["bin/convo.exe"]);
  assert.equal(resolveBinary({ platform: "win32", arch: "x64", env: {}, paths: [root] }), join(win, "bin/convo.exe"));
  // A package holding bin/convo but no convo.exe is broken, and said to be.
  const other = tempDir(t);
  install(other, "win32-x64", ["bin/convo"]);
  assert.throws(
    () => resolveBinary({ platform: "win32", arch: "x64", env: {}, paths: [other] }),
    (e) => e instanceof Error && /^the package @convo\/win32-x64 has no binary at .*convo\.exe: reinstall it/.test(e.message),
  );
});

test("a missing platform package is an error that names it", (t) => {
  const root = tempDir(t);
  const lookup = (/** @type {Partial<import("convo").LookupOptions>} */ o) => () => resolveBinary({ env: {}, paths: [root], ...o });
  /** @param {RegExp} re */
  const says = (re) => (/** @type {unknown} */ e) => {
    assert.ok(e instanceof Error);
    assert.match(e.message, re);
    return true;
  };
  assert.throws(lookup({ platform: "linux", arch: "arm64", env: { CONVO_LIBC: "musl" } }), (e) => {
    says(/^@convo\/linux-arm64-musl is not installed: it holds convo's binary for linux-arm64 \(musl\)/)(e);
    says(/npm install @convo\/linux-arm64-musl/)(e);
    says(/CONVO_BINARY/)(e);
    return true;
  });
  assert.throws(lookup({ platform: "linux", arch: "x64", libcProbes: { readFile: ldd(GLIBC_LDD) } }), says(/^@convo\/linux-x64-gnu is not installed/));
  assert.throws(lookup({ platform: "darwin", arch: "arm64" }), says(/^@convo\/darwin-arm64 is not installed: it holds convo's binary for darwin-arm64,/));
  assert.throws(lookup({ platform: "win32", arch: "x64" }), says(/^@convo\/win32-x64 is not installed/));
  // The package for the other C library is there: the error says how to use it.
  install(root, "linux-arm64-gnu", ["bin/convo"]);
  assert.throws(
    lookup({ platform: "linux", arch: "arm64", libc: "musl" }),
    says(/^@convo\/linux-arm64-musl is not installed.*; @convo\/linux-arm64-gnu is installed, but it is for glibc \(CONVO_LIBC=glibc would use it\)$/),
  );
  // No package at all for the machine.
  assert.throws(lookup({ platform: "freebsd", arch: "x64" }), says(/^convo has no prebuilt binary for freebsd-x64: build it/));
  assert.throws(lookup({ platform: "win32", arch: "arm64" }), says(/^convo has no prebuilt binary for win32-arm64/));
  // By default the lookup starts from the convo package itself: in this source tree no
  // platform package is installed, so every target ends in the error naming its package.
  for (const target of TARGETS) {
    assert.throws(() => resolveBinary({ env: {}, target }), says(new RegExp(`^@convo/${target.name} is not installed`)));
  }
});

test("ConvoClient.start with no binary and CONVO_LIBC=musl names the musl package", { skip: process.platform !== "linux" || process.arch !== "x64" }, async () => {
  const saved = { CONVO_BINARY: process.env.CONVO_BINARY, CONVO_LIBC: process.env.CONVO_LIBC };
  delete process.env.CONVO_BINARY;
  process.env.CONVO_LIBC = "musl";
  try {
    await assert.rejects(ConvoClient.start({ logger: null }), /^Error: @convo\/linux-x64-musl is not installed/);
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
});

/** The first bytes of an executable of a format and CPU; the rest zeros. */
const HEADERS = {
  "elf x64": () => elf(0x3e),
  "elf arm64": () => elf(0xb7),
  "pe x64": () => pe(0x8664),
  "macho x64": () => macho(0x01000007),
  "macho arm64": () => macho(0x0100000c),
};
/** @param {number} machine */
function elf(machine) {
  const b = Buffer.alloc(64);
  b.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1]);
  b.writeUInt16LE(machine, 18);
  return b;
}
/** @param {number} machine */
function pe(machine) {
  const b = Buffer.alloc(256);
  b.write("MZ", 0, "latin1");
  b.writeUInt32LE(0x80, 0x3c);
  b.write("PE\0\0", 0x80, "latin1");
  b.writeUInt16LE(machine, 0x84);
  return b;
}
/** @param {number} cpu */
function macho(cpu) {
  const b = Buffer.alloc(64);
  b.writeUInt32LE(0xfeedfacf, 0);
  b.writeUInt32LE(cpu, 4);
  return b;
}

test("a binary is packed only into the package of its format and CPU", (t) => {
  const dir = tempDir(t);
  const target = (/** @type {string} */ name) => /** @type {import("convo").Target} */ (TARGETS.find((x) => x.name === name));
  for (const [kind, bytes] of Object.entries(HEADERS)) {
    const path = join(dir, kind.replace(" ", "-"));
    writeFileSync(path, bytes());
    const [format, cpu] = kind.split(" ");
    assert.deepEqual(executableKind(path), { format, cpu });
  }
  checkBinary(target("linux-arm64-musl"), join(dir, "elf-arm64"));
  checkBinary(target("win32-x64"), join(dir, "pe-x64"));
  checkBinary(target("darwin-arm64"), join(dir, "macho-arm64"));
  assert.throws(() => checkBinary(target("linux-x64-gnu"), join(dir, "elf-arm64")), /elf-arm64 is elf arm64, not the elf x64 executable @convo\/linux-x64-gnu needs/);
  assert.throws(() => checkBinary(target("win32-x64"), join(dir, "elf-x64")), /is elf x64, not the pe x64 executable @convo\/win32-x64 needs/);
  writeFileSync(join(dir, "script"), "#!/bin/sh\n");
  assert.throws(() => checkBinary(target("darwin-x64"), join(dir, "script")), /is not an executable convo knows/);
});

test("packing from a folder of binaries: each target's binary by its Rust target or package name", (t) => {
  const bindir = tempDir(t);
  mkdirSync(join(bindir, "x86_64-unknown-linux-musl"));
  writeFileSync(join(bindir, "x86_64-unknown-linux-musl", "convo"), HEADERS["elf x64"]());
  writeFileSync(join(bindir, "convo-win32-x64.exe"), HEADERS["pe x64"]());
  mkdirSync(join(bindir, "aarch64-apple-darwin", "dist"), { recursive: true });
  writeFileSync(join(bindir, "aarch64-apple-darwin", "dist", "convo"), HEADERS["macho arm64"]());

  const { found, missing } = findBinaries(bindir, { profile: "dist" });
  assert.deepEqual(
    found.map((f) => [f.target.name, f.binary]),
    [
      ["linux-x64-musl", join(bindir, "x86_64-unknown-linux-musl", "convo")],
      ["darwin-arm64", join(bindir, "aarch64-apple-darwin", "dist", "convo")],
      ["win32-x64", join(bindir, "convo-win32-x64.exe")],
    ],
  );
  assert.deepEqual(missing, ["linux-x64-gnu", "linux-arm64-gnu", "linux-arm64-musl", "darwin-x64"]);
  // Without the profile, cargo's layout is not looked into.
  assert.deepEqual(findBinaries(bindir).missing, ["linux-x64-gnu", "linux-arm64-gnu", "linux-arm64-musl", "darwin-x64", "darwin-arm64"]);

  const out = tempDir(t);
  assert.throws(() => packAll(bindir, out, { profile: "dist" }), /^Error: no binary in .* for linux-x64-gnu, linux-arm64-gnu, linux-arm64-musl, darwin-x64 .*--allow-missing/);

  const packed = packAll(bindir, out, { profile: "dist", allowMissing: true });
  assert.deepEqual(packed.missing, missing);
  assert.match(packed.client.tarball, /convo-0\.1\.0\.tgz$/);
  const entries = (/** @type {string} */ tarball) => execFileSync("tar", ["tzf", tarball], { encoding: "utf8" }).trim().split("\n").sort();
  const manifest = (/** @type {string} */ tarball) => JSON.parse(execFileSync("tar", ["xzOf", tarball, "package/package.json"], { encoding: "utf8" }));
  const byTarget = Object.fromEntries(packed.platforms.map((p) => [p.target, p]));
  assert.deepEqual(Object.keys(byTarget), ["linux-x64-musl", "darwin-arm64", "win32-x64"]);
  assert.deepEqual(entries(byTarget["win32-x64"].tarball), ["package/README.md", "package/bin/convo.exe", "package/package.json"]);
  assert.deepEqual(entries(byTarget["linux-x64-musl"].tarball), ["package/README.md", "package/bin/convo", "package/package.json"]);
  const musl = manifest(byTarget["linux-x64-musl"].tarball);
  assert.deepEqual([musl.name, musl.os, musl.cpu, musl.libc], ["@convo/linux-x64-musl", ["linux"], ["x64"], ["musl"]]);
  const win = manifest(byTarget["win32-x64"].tarball);
  assert.deepEqual([win.name, win.os, win.cpu, win.libc], ["@convo/win32-x64", ["win32"], ["x64"], undefined]);
  const client = manifest(packed.client.tarball);
  assert.deepEqual(Object.keys(client.optionalDependencies), TARGETS.map(packageName));
});
