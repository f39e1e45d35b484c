// Packs the npm packages, each from a staging folder with the manifest it is published
// with (run `npm run build` first):
//
//   node pack.mjs client OUTDIR                    → OUTDIR/convo-<version>.tgz
//   node pack.mjs platform TARGET BINARY OUTDIR    → OUTDIR/convo-<target>-<version>.tgz
//   node pack.mjs all BINDIR OUTDIR                → every platform package whose binary
//                                                    BINDIR holds, and the client
//
// The client's published manifest is package.json without the development parts, plus an
// optional dependency on every platform package at the same version. It is made here, not
// kept in package.json, because `npm ci` refuses a lockfile that lacks optional
// dependencies which are not on the registry yet (napi-rs adds them at publish time too).
// A platform package is a package.json with `os`/`cpu`/`libc`, and the binary, copied in
// here (debug info stripped when `strip` is there; `--no-strip` keeps it) after checking
// that it is an executable of the target's format and CPU (ELF, PE or Mach-O).
//
// `all` finds each target's binary in BINDIR under its Rust target or package name:
// `BINDIR/<target>/convo`, `BINDIR/convo-<target>`, or with `--profile P`, cargo's own
// layout `BINDIR/<target>/P/convo` (so BINDIR can be cargo's target folder); `convo.exe`
// for Windows. A target without a binary is an error, unless `--allow-missing`. It prints
// one JSON object: `client`, `platforms` (target, rust, binary, tarball, size,
// unpackedSize) and `missing`.
import { execFileSync } from "node:child_process";
import { chmodSync, closeSync, copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { TARGETS, binaryPath, packageName } from "./dist/binary.js";

const here = fileURLToPath(new URL(".", import.meta.url));
const devManifest = () => JSON.parse(readFileSync(join(here, "package.json"), "utf8"));

/** The manifest the client is published with. */
export function clientManifest(pkg = devManifest()) {
  const { private: _private, scripts: _scripts, devDependencies: _dev, ...published } = pkg;
  published.optionalDependencies = Object.fromEntries(TARGETS.map((t) => [packageName(t), pkg.version]));
  return published;
}

/** The manifest of a platform package. */
export function platformManifest(target, pkg = devManifest()) {
  return {
    name: packageName(target),
    version: pkg.version,
    description: `The convo binary for ${target.os} ${target.cpu}${target.libc ? ` (${target.libc})` : ""}, built for ${target.rust}. Installed by the convo package as an optional dependency.`,
    license: pkg.license,
    os: [target.os],
    cpu: [target.cpu],
    ...(target.libc ? { libc: [target.libc] } : {}),
    files: [binaryPath(target), "README.md"],
    preferUnplugged: true,
  };
}

/** Runs `npm pack` in `dir`; returns the tarball's path and sizes. */
function npmPack(dir, out) {
  const [info] = JSON.parse(
    execFileSync("npm", ["pack", "--json", "--pack-destination", out], { cwd: dir, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }),
  );
  return { tarball: join(out, info.filename), size: info.size, unpackedSize: info.unpackedSize };
}

function stage(name, fill, out) {
  const dir = mkdtempSync(join(tmpdir(), `convo-pack-${name}-`));
  try {
    fill(dir);
    return npmPack(dir, out);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function packClient(out) {
  return stage("client", (dir) => {
    const pkg = clientManifest();
    for (const entry of pkg.files) cpSync(join(here, entry), join(dir, entry), { recursive: true });
    writeFileSync(join(dir, "package.json"), JSON.stringify(pkg, null, 2) + "\n");
  }, out);
}

/** What the start of an executable says it is: its format and CPU (npm's names), or
 * undefined for anything else. */
export function executableKind(path) {
  const head = Buffer.alloc(4096);
  const fd = openSync(path, "r");
  let n;
  try {
    n = readSync(fd, head, 0, head.length, 0);
  } finally {
    closeSync(fd);
  }
  const b = head.subarray(0, n);
  if (n >= 20 && b.readUInt32BE(0) === 0x7f454c46) {
    const machine = b[5] === 2 ? b.readUInt16BE(18) : b.readUInt16LE(18);
    return { format: "elf", cpu: { 0x3e: "x64", 0xb7: "arm64" }[machine] ?? `machine 0x${machine.toString(16)}` };
  }
  if (n >= 0x40 && b.toString("latin1", 0, 2) === "MZ") {
    const pe = b.readUInt32LE(0x3c);
    if (pe + 6 <= n && b.toString("latin1", pe, pe + 4) === "PE\0\0") {
      const machine = b.readUInt16LE(pe + 4);
      return { format: "pe", cpu: { 0x8664: "x64", 0xaa64: "arm64" }[machine] ?? `machine 0x${machine.toString(16)}` };
    }
  }
  if (n >= 8 && b.readUInt32LE(0) === 0xfeedfacf) {
    const cpu = b.readUInt32LE(4);
    return { format: "macho", cpu: { 0x01000007: "x64", 0x0100000c: "arm64" }[cpu] ?? `cputype 0x${cpu.toString(16)}` };
  }
  return undefined;
}

const FORMATS = { linux: "elf", darwin: "macho", win32: "pe" };

/** Throws unless `binary` is an executable for `target`'s OS and CPU. */
export function checkBinary(target, binary) {
  const kind = executableKind(binary);
  const want = { format: FORMATS[target.os], cpu: target.cpu };
  if (!kind || kind.format !== want.format || kind.cpu !== want.cpu) {
    const got = kind ? `${kind.format} ${kind.cpu}` : "not an executable convo knows";
    throw new Error(`${binary} is ${got}, not the ${want.format} ${want.cpu} executable ${packageName(target)} needs`);
  }
}

/**
 * Where `all` looks for a target's binary in `bindir`, in this order.
 * @param {import("./dist/binary.js").Target} target @param {string} bindir
 * @param {{ profile?: string }} [options] cargo's profile folder (`dist`, `release`) to look in first
 */
export function binaryCandidates(target, bindir, { profile } = {}) {
  const exe = target.os === "win32" ? "convo.exe" : "convo";
  const ext = target.os === "win32" ? ".exe" : "";
  return [
    ...(profile ? [join(bindir, target.rust, profile, exe)] : []),
    ...[target.rust, target.name].flatMap((id) => [join(bindir, id, exe), join(bindir, `convo-${id}${ext}`)]),
  ];
}

/**
 * The binary of each target found in `bindir`, and the targets with none. Two candidates
 * of one target both there is an error: which is the one to ship is not clear.
 * @param {string} bindir @param {{ profile?: string }} [options]
 */
export function findBinaries(bindir, options = {}) {
  const found = [];
  const missing = [];
  for (const target of TARGETS) {
    const there = binaryCandidates(target, bindir, options).filter((p) => existsSync(p));
    if (there.length > 1) throw new Error(`${target.name}: more than one binary in ${bindir}: ${there.join(", ")}`);
    if (there.length === 1) found.push({ target, binary: there[0] });
    else missing.push(target.name);
  }
  return { found, missing };
}

/**
 * Every platform package whose binary `bindir` holds, and the client, into `out`.
 * @param {string} bindir @param {string} out
 * @param {{ allowMissing?: boolean, profile?: string, strip?: boolean }} [options]
 */
export function packAll(bindir, out, { allowMissing = false, profile, strip = true } = {}) {
  const { found, missing } = findBinaries(bindir, { profile });
  if (missing.length && !allowMissing) {
    const first = /** @type {import("./dist/binary.js").Target} */ (TARGETS.find((t) => t.name === missing[0]));
    const where = binaryCandidates(first, bindir, { profile }).join(" or ");
    throw new Error(`no binary in ${bindir} for ${missing.join(", ")} (for ${missing[0]}: ${where}); --allow-missing packs the others`);
  }
  for (const { target, binary } of found) checkBinary(target, binary);
  const platforms = found.map(({ target, binary }) => ({ target: target.name, rust: target.rust, binary, ...packPlatform(target.name, binary, out, { strip }) }));
  return { client: packClient(out), platforms, missing };
}

export function packPlatform(name, binary, out, { strip = true } = {}) {
  const target = TARGETS.find((t) => t.name === name);
  if (!target) throw new Error(`unknown target ${name}; known: ${TARGETS.map((t) => t.name).join(", ")}`);
  checkBinary(target, binary);
  return stage(name, (dir) => {
    const dest = join(dir, binaryPath(target));
    mkdirSync(join(dest, ".."), { recursive: true });
    copyFileSync(binary, dest);
    chmodSync(dest, 0o755);
    if (strip && target.os === "linux") {
      try {
        execFileSync("strip", ["--strip-debug", dest], { stdio: "ignore" });
      } catch {
        // no strip here: the binary goes in as built
      }
    }
    writeFileSync(join(dir, "package.json"), JSON.stringify(platformManifest(target), null, 2) + "\n");
    writeFileSync(
      join(dir, "README.md"),
      `# ${packageName(target)}\n\nThe \`convo\` binary for ${target.os}-${target.cpu}${target.libc ? ` (${target.libc})` : ""}. ` +
        `The \`convo\` package depends on it optionally and finds it by itself; ` +
        `there is nothing to import from here.\n`,
    );
  }, out);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [kind, ...rest] = process.argv.slice(2);
  const profileAt = rest.indexOf("--profile");
  const profile = profileAt >= 0 ? rest.splice(profileAt, 2)[1] : undefined;
  const flags = rest.filter((a) => a.startsWith("--"));
  const args = rest.filter((a) => !a.startsWith("--"));
  const unknown = flags.filter((f) => !["--no-strip", "--allow-missing"].includes(f));
  if (unknown.length) {
    console.error(`pack.mjs: unknown flag ${unknown.join(", ")}`);
    process.exit(2);
  }
  const strip = !flags.includes("--no-strip");
  let result;
  if (kind === "client" && args.length === 1) {
    result = packClient(resolve(args[0]));
  } else if (kind === "platform" && args.length === 3) {
    result = packPlatform(args[0], resolve(args[1]), resolve(args[2]), { strip });
  } else if (kind === "all" && args.length === 2 && (profileAt < 0 || profile)) {
    mkdirSync(resolve(args[1]), { recursive: true });
    try {
      result = packAll(resolve(args[0]), resolve(args[1]), { allowMissing: flags.includes("--allow-missing"), profile, strip });
    } catch (e) {
      console.error(`pack.mjs: ${e instanceof Error ? e.message : e}`);
      process.exit(1);
    }
  } else {
    console.error(
      "usage: node pack.mjs client OUTDIR\n" +
        "       node pack.mjs platform TARGET BINARY OUTDIR [--no-strip]\n" +
        "       node pack.mjs all BINDIR OUTDIR [--profile P] [--allow-missing] [--no-strip]",
    );
    process.exit(2);
  }
  console.log(JSON.stringify(result));
}
