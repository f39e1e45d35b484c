// Packs the npm packages, each from a staging folder with the manifest it is published
// with (run `npm run build` first):
//
//   node pack.mjs client OUTDIR                    → OUTDIR/convo-<version>.tgz
//   node pack.mjs platform TARGET BINARY OUTDIR    → OUTDIR/convo-<target>-<version>.tgz
//
// The client's published manifest is package.json without the development parts, plus an
// optional dependency on every platform package at the same version. It is made here, not
// kept in package.json, because `npm ci` refuses a lockfile that lacks optional
// dependencies which are not on the registry yet (napi-rs adds them at publish time too).
// A platform package is a package.json with `os`/`cpu`/`libc`, and the binary, copied in
// here (debug info stripped when `strip` is there; `--no-strip` keeps it).
import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
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

export function packPlatform(name, binary, out, { strip = true } = {}) {
  const target = TARGETS.find((t) => t.name === name);
  if (!target) throw new Error(`unknown target ${name}; known: ${TARGETS.map((t) => t.name).join(", ")}`);
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
  const flags = rest.filter((a) => a.startsWith("--"));
  const args = rest.filter((a) => !a.startsWith("--"));
  let result;
  if (kind === "client" && args.length === 1) {
    result = packClient(resolve(args[0]));
  } else if (kind === "platform" && args.length === 3) {
    result = packPlatform(args[0], resolve(args[1]), resolve(args[2]), { strip: !flags.includes("--no-strip") });
  } else {
    console.error("usage: node pack.mjs client OUTDIR | node pack.mjs platform TARGET BINARY OUTDIR [--no-strip]");
    process.exit(2);
  }
  console.log(JSON.stringify(result));
}
