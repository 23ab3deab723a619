/** A page's first and last byte as the benches time them (scripts/bench/measure.ts, PageClock). */
import { PageClock, pageTimesText, type Measurement } from "../../scripts/bench/measure";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const walk = (firstByteMs: number, lastByteMs: number): Measurement => ({ name: "walk", rows: 1, bytes: 1, pages: 1, seconds: 1, page: { firstByteMs, lastByteMs } });

describe("PageClock", () => {
  it("times each page from its asking to its first chunk and to its end, medians over the pages", async () => {
    const clock = new PageClock();
    for (const [beforeFirst, afterFirst] of [
      [5, 40],
      [40, 5],
      [5, 40],
    ]) {
      clock.ask();
      await sleep(beforeFirst);
      clock.chunk();
      await sleep(afterFirst);
      clock.chunk(); // a later chunk is not the first byte
      clock.ended();
    }
    const times = clock.times()!;
    // Medians: the first byte of the two pages that waited 5 ms (not the one that waited 40), each page ~45 ms.
    expect(times.firstByteMs).toBeGreaterThanOrEqual(4);
    expect(times.firstByteMs).toBeLessThan(35);
    expect(times.lastByteMs).toBeGreaterThanOrEqual(44);
  });

  it("takes a page without a byte as ending at its first byte, and times nothing before a page ends", async () => {
    const clock = new PageClock();
    expect(clock.times()).toBeUndefined();
    clock.ask();
    await sleep(10);
    clock.ended();
    const { firstByteMs, lastByteMs } = clock.times()!;
    expect(firstByteMs).toBeGreaterThanOrEqual(9);
    expect(lastByteMs).toBeGreaterThanOrEqual(firstByteMs);
  });
});

describe("pageTimesText", () => {
  it("gives the medians over a path's rounds, and n/a where none was timed", () => {
    expect(pageTimesText([walk(1, 10), walk(3, 30), walk(2, 20)])).toBe("2.0 / 20.0 ms");
    expect(pageTimesText([{ name: "untimed", rows: 1, bytes: 1, pages: 1, seconds: 1 }])).toBe("n/a");
  });
});
