import { SingleBar } from "cli-progress";
import type { ApplyProgress } from "./apply/apply";

/** Milliseconds before progress appears: quick documents print nothing extra. */
function progressDelayMs(): number {
  const raw = process.env.EXPORTCTL_PROGRESS_AFTER_MS;
  const value = raw === undefined ? 1000 : Number(raw);
  return Number.isFinite(value) && value >= 0 ? value : 1000;
}

/**
 * Progress of `apply` on stderr (cli-progress): shown only once a document has taken more than a
 * second, redrawn in place on a terminal and printed as a line per second (and at the end) otherwise.
 */
export function applyProgress(stream: NodeJS.WriteStream): { update: (p: ApplyProgress) => void; stop: () => void } {
  const bar = new SingleBar({
    stream,
    format: "apply [{bar}] {value}/{total} steps | {stage} | {duration}s",
    noTTYOutput: true,
    notTTYSchedule: 1000,
    hideCursor: false,
    clearOnComplete: false,
  });
  let latest: ApplyProgress | undefined;
  let started = false;
  const timer = setTimeout(() => {
    started = true;
    bar.start(latest?.total ?? 1, latest?.done ?? 0, { stage: latest?.stage ?? "starting" });
  }, progressDelayMs());
  timer.unref();
  return {
    update: (p) => {
      latest = p;
      if (started) {
        bar.setTotal(p.total);
        bar.update(p.done, { stage: p.stage });
      }
    },
    stop: () => {
      clearTimeout(timer);
      if (started) bar.stop();
    },
  };
}
