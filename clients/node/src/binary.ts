/**
 * Finding the convo binary: the `binary` option, then `CONVO_BINARY`, then the platform
 * package npm installed beside this one (`@convo/linux-x64-gnu`, …: optional dependencies
 * with `os`/`cpu`/`libc` fields, so npm installs only the one that fits; no postinstall
 * download), then an error naming the package that is missing.
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/** A platform package: its npm name suffix and the `os`, `cpu` and `libc` fields npm
 * matches against the machine, and the Rust target it is built for. */
export interface Target {
  /** `@convo/<name>` */
  name: string;
  os: NodeJS.Platform;
  cpu: string;
  libc?: "glibc" | "musl";
  rust: string;
}

/** Every platform package convo declares. Only linux-x64-gnu is built in this repository;
 * the others are packed the same way (`pack.mjs TARGET BINARY`) on their own machines. */
export const TARGETS: readonly Target[] = [
  { name: "linux-x64-gnu", os: "linux", cpu: "x64", libc: "glibc", rust: "x86_64-unknown-linux-gnu" },
  { name: "linux-arm64-gnu", os: "linux", cpu: "arm64", libc: "glibc", rust: "aarch64-unknown-linux-gnu" },
  { name: "linux-x64-musl", os: "linux", cpu: "x64", libc: "musl", rust: "x86_64-unknown-linux-musl" },
  { name: "linux-arm64-musl", os: "linux", cpu: "arm64", libc: "musl", rust: "aarch64-unknown-linux-musl" },
  { name: "darwin-x64", os: "darwin", cpu: "x64", rust: "x86_64-apple-darwin" },
  { name: "darwin-arm64", os: "darwin", cpu: "arm64", rust: "aarch64-apple-darwin" },
  { name: "win32-x64-msvc", os: "win32", cpu: "x64", rust: "x86_64-pc-windows-msvc" },
];

/** The npm name of a target's package. */
export const packageName = (target: Target): string => `@convo/${target.name}`;

/** The binary's path inside a platform package. */
export const binaryPath = (target: Target): string => (target.os === "win32" ? "bin/convo.exe" : "bin/convo");

/** Which C library this Node runs on (Linux only), as process.report tells. */
function libc(): "glibc" | "musl" {
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
  return header?.glibcVersionRuntime ? "glibc" : "musl";
}

/** The target of this machine, or undefined when convo has no package for it. */
export function currentTarget(platform = process.platform, arch = process.arch): Target | undefined {
  const c = platform === "linux" ? libc() : undefined;
  return TARGETS.find((t) => t.os === platform && t.cpu === arch && t.libc === c);
}

export interface LookupOptions {
  /** An explicit path: used as given. */
  binary?: string;
  /** Where `CONVO_BINARY` is read; `process.env` by default. */
  env?: NodeJS.ProcessEnv;
  /** The target to look for; this machine's by default. */
  target?: Target;
}

/**
 * The path of the convo binary to spawn. Throws an Error that names the missing platform
 * package (and how to get past it) when there is none.
 */
export function resolveBinary(options: LookupOptions = {}): string {
  if (options.binary) return options.binary;
  const fromEnv = (options.env ?? process.env).CONVO_BINARY;
  if (fromEnv) return fromEnv;
  const target = options.target ?? currentTarget();
  const where = `${process.platform}-${process.arch}${process.platform === "linux" ? ` (${libc()})` : ""}`;
  if (!target) {
    throw new Error(
      `convo has no prebuilt binary for ${where}: build it (cargo build --release) and pass its path as the \`binary\` option or in CONVO_BINARY`,
    );
  }
  const name = packageName(target);
  let manifest: string;
  try {
    manifest = createRequire(import.meta.url).resolve(`${name}/package.json`);
  } catch {
    throw new Error(
      `convo's binary for ${where} comes in the package ${name}, which is not installed: ` +
        `it is an optional dependency of convo, so check that it was not left out ` +
        `(--omit=optional, --no-optional, or a lockfile made on another platform) and run \`npm install ${name}\`; ` +
        `or pass the path of a convo binary as the \`binary\` option or in CONVO_BINARY`,
    );
  }
  const path = join(dirname(manifest), binaryPath(target));
  if (!existsSync(path)) throw new Error(`the package ${name} has no binary at ${path}: reinstall it`);
  return path;
}
