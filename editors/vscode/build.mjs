// Bundles the extension with esbuild, so the .vsix needs no node_modules:
//   dist/extension.js  the extension (CommonJS for VS Code's extension host), with the
//                      Node client of clients/node built in from its TypeScript sources
//                      (and vscode-jsonrpc, its one dependency)
//   dist/webview.js    the transcript page's script (a browser IIFE)
//   dist/lib.cjs       the pure parts and the client, for the unit tests (not packaged)
//   node build.mjs [--watch]
import * as esbuild from "esbuild";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const client = join(here, "../../clients/node/src/index.ts");

const node = {
  bundle: true,
  platform: "node",
  format: "cjs",
  target: "node18",
  sourcemap: true,
  // The client's sources sit outside this package: their one dependency comes from here.
  nodePaths: [join(here, "node_modules")],
  alias: { convo: client },
  // import.meta.url (binary.ts's createRequire) as CommonJS knows it.
  define: { "import.meta.url": "__convo_import_meta_url" },
  banner: { js: 'const __convo_import_meta_url = require("url").pathToFileURL(__filename).href;' },
  logLevel: "warning",
};

const builds = [
  { ...node, entryPoints: [join(here, "src/extension.ts")], outfile: join(here, "dist/extension.js"), external: ["vscode"] },
  { ...node, entryPoints: [join(here, "test/unit/lib.ts")], outfile: join(here, "dist/lib.cjs") },
  {
    bundle: true,
    platform: "browser",
    format: "iife",
    target: "es2022",
    entryPoints: [join(here, "webview/main.ts")],
    outfile: join(here, "dist/webview.js"),
    alias: { convo: client },
    logLevel: "warning",
  },
];

if (process.argv.includes("--watch")) {
  for (const b of builds) await (await esbuild.context(b)).watch();
} else {
  await Promise.all(builds.map((b) => esbuild.build(b)));
}
