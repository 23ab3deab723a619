/**
 * Runs a script's `main` when its file is the process's entry point (not when a test imports it):
 * exits with the code `main` returns, or prints a thrown error's message (never a stack trace) and
 * exits 1.
 */
export function runAsScript(mod: NodeModule, main: (argv: string[]) => number | Promise<number>): void {
  if (require.main !== mod) return;
  Promise.resolve()
    .then(() => main(process.argv.slice(2)))
    .then(
      (code) => process.exit(code),
      (err: unknown) => {
        process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
        process.exit(1);
      },
    );
}
