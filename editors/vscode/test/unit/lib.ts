// What the unit tests import (bundled to dist/lib.js): the pure parts of the extension,
// and the Node client they drive the real binary with.
export { ConvoClient } from "convo";
export { parseMarkdown, inline, plainText } from "../../src/view/markdown.js";
export { renderTranscript, imageDataUrl, isSafeLink, reasoningOf, usageText, callParts, contentText } from "../../src/view/render.js";
export { SessionsModel, firstUserLine, labelOf, sessionLabel, sessionDescription } from "../../src/view/sessions.js";
export { transcriptMarkdown } from "../../src/view/copy.js";
export { target, guessFormat } from "../../src/view/args.js";
