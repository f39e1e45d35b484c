/**
 * Finding the convo binary: the `binary` option, then `CONVO_BINARY`, then the platform
 * package npm installed beside this one (`@convo/linux-x64-gnu`, …: optional dependencies
 * with `os`/`cpu`/`libc` fields, so npm installs only the one that fits; no postinstall
 * download), then an error naming the package that is missing.
 *
 * On Linux the C library decides between the `-gnu` and the `-musl` package, found the way
 * napi-rs's loaders and detect-libc (sharp) find it: `CONVO_LIBC` when set, else what
 * `/usr/bin/ldd` is (glibc's script or musl's), else Node's own diagnostic report (a Node
 * linked against glibc reports `glibcVersionRuntime`; one on musl does not). npm's `libc`
 * field already keeps the wrong package out where npm knows the C library; the choice at
 * run time covers package managers and lockfiles that install both.
 */
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/** A C library on Linux, as npm's `libc` field names it. */
export type Libc = "glibc" | "musl";

/** A platform package: its npm name suffix and the `os`, `cpu` and `libc` fields npm
 * matches against the machine, and the Rust target it is built for. */
export interface Target {
  /** `@convo/<name>` */
  name: string;
  os: NodeJS.Platform;
  cpu: string;
  libc?: Libc;
  rust: string;
}

/** Every platform package convo declares: the table of the protocol's section 14. */
export const TARGETS: readonly Target[] = [
  { name: "linux-x64-gnu", os: "linux", cpu: "x64", libc: "glibc", rust: "x86_64-unknown-linux-gnu" },
  { name: "linux-arm64-gnu", os: "linux", cpu: "arm64", libc: "glibc", rust: "aarch64-unknown-linux-gnu" },
  { name: "linux-x64-musl", os: "linux", cpu: "x64", libc: "musl", rust: "x86_64-unknown-linux-musl" },
  { name: "linux-arm64-musl", os: "linux", cpu: "arm64", libc: "musl", rust: "aarch64-unknown-linux-musl" },
  { name: "darwin-x64", os: "darwin", cpu: "x64", rust: "x86_64-apple-darwin" },
  { name: "darwin-arm64", os: "darwin", cpu: "arm64", rust: "aarch64-apple-darwin" },
  { name: "win32-x64", os: "win32", cpu: "x64", rust: "x86_64-pc-windows-gnu" },
];

/** The npm name of a target's package. */
export const packageName = (target: Target): string => `@convo/${target.name}`;

/** The binary's path inside a platform package. */
export const binaryPath = (target: Target): string => (target.os === "win32" ? "bin/convo.exe" : "bin/convo");

/** Where detectLibc looks; each defaults to this machine's. */
export interface LibcProbes {
  /** Read for `CONVO_LIBC`. */
  env?: NodeJS.ProcessEnv;
  /** The text of a file, or undefined when it cannot be read (`/usr/bin/ldd` is asked). */
  readFile?: (path: string) => string | undefined;
  /** Node's diagnostic report (`process.report.getReport()`), or undefined. */
  report?: () => unknown;
}

const LIBCS: readonly Libc[] = ["glibc", "musl"];

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}

function nodeReport(): unknown {
  const report = process.report as (NodeJS.ProcessReport & { excludeNetwork?: boolean }) | undefined;
  if (typeof report?.getReport !== "function") return undefined;
  // The network part of a report can take seconds (reverse DNS of each socket); Node 22.13+
  // can leave it out.
  if (!("excludeNetwork" in report)) return report.getReport();
  const excluded = report.excludeNetwork;
  report.excludeNetwork = true;
  try {
    return report.getReport();
  } finally {
    report.excludeNetwork = excluded;
  }
}

/** What a diagnostic report says of the C library Node runs on, if anything. */
function libcFromReport(report: unknown): Libc | undefined {
  if (typeof report !== "object" || report === null) return undefined;
  const { header, sharedObjects } = report as { header?: { glibcVersionRuntime?: unknown }; sharedObjects?: unknown };
  if (header?.glibcVersionRuntime) return "glibc";
  if (Array.isArray(sharedObjects) && sharedObjects.some((so) => typeof so === "string" && /(?:ld-musl-|libc\.musl-)/.test(so))) return "musl";
  return header ? "musl" : undefined;
}

/**
 * The C library of this Linux machine: `CONVO_LIBC` (`glibc` or `musl`) when set, then
 * `/usr/bin/ldd` (musl's mentions musl, glibc's the GNU C Library), then Node's diagnostic
 * report; glibc when nothing tells. Throws on a `CONVO_LIBC` that is neither.
 */
export function detectLibc(probes: LibcProbes = {}): Libc {
  const forced = (probes.env ?? process.env).CONVO_LIBC;
  if (forced) {
    if (!(LIBCS as readonly string[]).includes(forced)) throw new Error(`CONVO_LIBC is ${JSON.stringify(forced)}: it can be glibc or musl`);
    return forced as Libc;
  }
  const ldd = (probes.readFile ?? readText)("/usr/bin/ldd");
  if (ldd?.includes("musl")) return "musl";
  if (ldd && /GNU C Library|GLIBC/.test(ldd)) return "glibc";
  return libcFromReport((probes.report ?? nodeReport)()) ?? "glibc";
}

/** The target of a machine (this one by default), or undefined when convo has no package
 * for it. `libc` matters on Linux only; detected when not given. */
export function currentTarget(platform: NodeJS.Platform = process.platform, arch: string = process.arch, libc?: Libc): Target | undefined {
  const c = platform === "linux" ? (libc ?? detectLibc()) : undefined;
  return TARGETS.find((t) => t.os === platform && t.cpu === arch && t.libc === c);
}

export interface LookupOptions {
  /** An explicit path: used as given. */
  binary?: string;
  /** Where `CONVO_BINARY` and `CONVO_LIBC` are read; `process.env` by default. */
  env?: NodeJS.ProcessEnv;
  /** The target to look for; the machine's (below) by default. */
  target?: Target;
  /** The machine: `process.platform`, `process.arch` and the detected C library by default. */
  platform?: NodeJS.Platform;
  arch?: string;
  libc?: Libc;
  /** How the C library is detected when `libc` is not given (`env` is this lookup's). */
  libcProbes?: Omit<LibcProbes, "env">;
  /** Folders to find the platform package from (as `require.resolve`'s `paths`); by
   * default this package's own, so the one npm installed beside it is found. */
  paths?: readonly string[];
}

/** Whether a package can be found, and where its package.json is. */
function findPackage(name: string, paths: readonly string[] | undefined): string | undefined {
  try {
    return createRequire(import.meta.url).resolve(`${name}/package.json`, paths ? { paths: [...paths] } : undefined);
  } catch {
    return undefined;
  }
}

/**
 * The path of the convo binary to spawn. Throws an Error that names the missing platform
 * package (and how to get past it) when there is none.
 */
export function resolveBinary(options: LookupOptions = {}): string {
  if (options.binary) return options.binary;
  const env = options.env ?? process.env;
  if (env.CONVO_BINARY) return env.CONVO_BINARY;
  const platform = options.target?.os ?? options.platform ?? process.platform;
  const arch = options.target?.cpu ?? options.arch ?? process.arch;
  const libc = options.target ? options.target.libc : platform === "linux" ? (options.libc ?? detectLibc({ ...options.libcProbes, env })) : undefined;
  const target = options.target ?? currentTarget(platform, arch, libc);
  const where = `${platform}-${arch}${libc ? ` (${libc})` : ""}`;
  const yourOwn = "or pass the path of a convo binary as the `binary` option or in CONVO_BINARY";
  if (!target) {
    throw new Error(`convo has no prebuilt binary for ${where}: build it (cargo build --release) and pass its path as the \`binary\` option or in CONVO_BINARY`);
  }
  const name = packageName(target);
  const manifest = findPackage(name, options.paths);
  if (!manifest) {
    // A package for the same machine with the other C library, installed by mistake or on
    // purpose: say so, since CONVO_LIBC can pick it.
    const other = target.libc && TARGETS.find((t) => t.os === target.os && t.cpu === target.cpu && t.libc && t.libc !== target.libc);
    const otherHint =
      other && findPackage(packageName(other), options.paths)
        ? `; ${packageName(other)} is installed, but it is for ${other.libc} (CONVO_LIBC=${other.libc} would use it)`
        : "";
    throw new Error(
      `${name} is not installed: it holds convo's binary for ${where}, and is an optional dependency of convo, ` +
        `so check that it was not left out (--omit=optional, --no-optional, or a lockfile made on another platform) ` +
        `and run \`npm install ${name}\`; ${yourOwn}${otherHint}`,
    );
  }
  const path = join(dirname(manifest), binaryPath(target));
  if (!existsSync(path)) throw new Error(`the package ${name} has no binary at ${path}: reinstall it, ${yourOwn}`);
  return path;
}
