/**
 * What the CLI prints: one progress bar per dataset on a terminal (cli-progress), JSON lines
 * otherwise. Every message passes through `redact`, so a key secret never reaches the output.
 */
import { MultiBar, Presets, type SingleBar } from "cli-progress";
import type { SyncEvent } from "./engine";

/** Key secrets (and ids) look like ak_ + base62; URLs may carry passwords. */
export function redact(text: string): string {
  return text.replace(/ak_[A-Za-z0-9]+/g, "ak_***").replace(/(\/\/[^:/@\s]+):[^@\s]*@/g, "$1:***@");
}

export interface Reporter {
  event(e: SyncEvent): void;
  /** A final or standalone record (summary, status line, verify result, error). */
  record(kind: string, data: Record<string, unknown>, text?: string): void;
  close(): void;
}

export function jsonReporter(out: NodeJS.WritableStream = process.stdout): Reporter {
  const write = (obj: Record<string, unknown>) => out.write(redact(JSON.stringify({ time: new Date().toISOString(), ...obj })) + "\n");
  return {
    event: (e) => write({ ...e }),
    record: (kind, data) => write({ event: kind, ...data }),
    close: () => undefined,
  };
}

export function terminalReporter(out: NodeJS.WriteStream = process.stderr): Reporter {
  const multi = new MultiBar(
    {
      stream: out,
      format: "{dataset} | {rows} rows | {speed} rows/s | {status}",
      hideCursor: true,
      clearOnComplete: false,
      autopadding: true,
      fps: 5,
    },
    Presets.shades_classic,
  );
  const bars = new Map<string, SingleBar>();
  const bar = (dataset: string) => {
    let b = bars.get(dataset);
    if (!b) {
      b = multi.create(1, 0, { dataset: dataset.padEnd(40).slice(0, 40), rows: 0, speed: 0, status: "waiting" });
      bars.set(dataset, b);
    }
    return b;
  };
  const log = (text: string) => multi.log(redact(text) + "\n");
  return {
    event: (e) => {
      switch (e.event) {
        case "dataset-start":
          bar(e.dataset).update(0, { status: e.mode === "full" ? `full read (${e.reason ?? ""})` : e.mode });
          break;
        case "page":
          bar(e.dataset).update(0, { rows: e.totalRows, speed: e.rowsPerSecond, status: "syncing" });
          break;
        case "dataset-done":
          bar(e.dataset).update(1, { rows: e.rows, speed: e.rowsPerSecond, status: `done${e.trimmed + e.swept ? `, ${e.trimmed + e.swept} deleted` : ""}` });
          break;
        case "dataset-error":
          bar(e.dataset).update(0, { status: `FAILED: ${redact(e.errorCode ?? e.message).slice(0, 60)}` });
          log(`${e.dataset}: ${e.message}`);
          break;
        case "page-retry":
          log(`${e.dataset}: page retry ${e.attempt} in ${e.delayMs} ms: ${e.message}`);
          break;
        case "dataset-retired":
          log(`${e.dataset}: no longer listed; its table is kept and marked retired`);
          break;
        case "listing":
          if (e.status === 304) log("listing unchanged (304): nothing to sync");
          break;
        default:
          break;
      }
    },
    record: (_kind, data, text) => {
      multi.stop();
      out.write(redact(text ?? JSON.stringify(data)) + "\n");
    },
    close: () => multi.stop(),
  };
}
