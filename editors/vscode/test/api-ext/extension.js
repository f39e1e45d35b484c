// Another extension using convo's API, as the README shows: the Node client of the convo
// extension's own process. Its command creates a session, appends to it, reads it back,
// and says what it got in a notification the end-to-end test reads.
const vscode = require("vscode");

exports.activate = (context) => {
  context.subscriptions.push(
    vscode.commands.registerCommand("convoApiTest.run", async () => {
      try {
        const convo = await vscode.extensions.getExtension("convo.convo").activate();
        const client = await convo.client();
        const { session_id } = await client.createSession({ title: "made through exports.client()" });
        await client.addUser({ session_id, text: "hello from another extension" });
        const { messages } = await client.history({ session_id });
        const same = (await convo.client()) === client;
        vscode.window.showInformationMessage(
          `convo API test: session ${session_id}, ${messages.length} message(s), store ${client.info.capabilities.store}, same client: ${same}`,
        );
      } catch (e) {
        vscode.window.showErrorMessage(`convo API test failed: ${e && e.message}`);
      }
    }),
  );
};
