// pure-rand 8 publishes its entry points through package "exports" only, which this repository's
// TypeScript module resolution (node10) does not read; the runtime require resolves them.
interface RandomGenerator {
  next(): number;
}
/* eslint-disable @typescript-eslint/no-require-imports */
const { xoroshiro128plus } = require("pure-rand/generator/xoroshiro128plus") as { xoroshiro128plus(seed: number): RandomGenerator };
const { uniformInt } = require("pure-rand/distribution/uniformInt") as { uniformInt(rng: RandomGenerator, from: number, to: number): number };
const { uniformFloat64 } = require("pure-rand/distribution/uniformFloat64") as { uniformFloat64(rng: RandomGenerator): number };
/* eslint-enable @typescript-eslint/no-require-imports */

/**
 * The simulator's only source of randomness: a seeded xoroshiro128+ stream (pure-rand). Every
 * choice of the churn generator and of the fault schedule comes from one of these, so a seed
 * reproduces the same sequence of changes and the same schedule of faults.
 */
export class Random {
  private readonly rng: RandomGenerator;
  constructor(seed: number) {
    this.rng = xoroshiro128plus(seed | 0);
  }
  /** A derived stream (e.g. one per organization), independent of how much the parent has drawn. */
  static derived(seed: number, label: string): Random {
    let h = seed | 0;
    for (const ch of label) h = (Math.imul(h, 31) + ch.charCodeAt(0)) | 0;
    return new Random(h);
  }
  int(from: number, to: number): number {
    return uniformInt(this.rng, from, to);
  }
  float(): number {
    return uniformFloat64(this.rng);
  }
  chance(p: number): boolean {
    return this.float() < p;
  }
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error("pick from an empty list");
    return items[this.int(0, items.length - 1)];
  }
  /** A key from a table of weights. */
  weighted<K extends string>(weights: Record<K, number>): K {
    const entries = Object.entries(weights) as [K, number][];
    const total = entries.reduce((s, [, w]) => s + w, 0);
    let x = this.float() * total;
    for (const [k, w] of entries) {
      if ((x -= w) < 0) return k;
    }
    return entries[entries.length - 1][0];
  }
  /** Exponential inter-arrival time for a Poisson process of `ratePerSecond`, in ms. */
  interval(ratePerSecond: number): number {
    return (-Math.log(1 - this.float()) / ratePerSecond) * 1000;
  }
  uuid(): string {
    const hex = Array.from({ length: 32 }, () => this.int(0, 15).toString(16));
    hex[12] = "4";
    hex[16] = ((this.int(0, 15) & 3) | 8).toString(16);
    const s = hex.join("");
    return `${s.slice(0, 8)}-${s.slice(8, 12)}-${s.slice(12, 16)}-${s.slice(16, 20)}-${s.slice(20)}`;
  }
  word(): string {
    return this.pick(WORDS);
  }
  shuffle<T>(items: T[]): T[] {
    const out = items.slice();
    for (let i = out.length - 1; i > 0; i--) {
      const j = this.int(0, i);
      [out[i], out[j]] = [out[j], out[i]];
    }
    return out;
  }
}

const WORDS = [
  "alder", "birch", "cedar", "delta", "ember", "fjord", "grove", "harbor", "indigo", "juniper", "kestrel", "lumen",
  "maple", "nectar", "onyx", "prairie", "quartz", "raven", "sierra", "tundra", "umber", "violet", "willow", "yarrow",
  "zephyr", "Ærø", "crème, brûlée", 'say "hi"', "line\nbreak",
];
