/** The CPU ceiling the benches print beside each ratio (scripts/bench/cpu.ts). */
import { ceilingNote, cpuCeiling, MACHINE_CORES, type CpuAccount } from "../../scripts/bench/cpu";

const account = (machine: number): CpuAccount => ({ wallSeconds: 1, machine, processes: {}, self: 0, rest: machine });

describe("cpuCeiling", () => {
  it("is the reference's time over the path's CPU spread over every core", () => {
    // 100 000 rows costing 1.5 core-s take at least 1.5 / cores s; against 200 000 rows/s (0.5 s):
    expect(cpuCeiling(100_000, account(1.5), 200_000)).toBeCloseTo((0.5 * MACHINE_CORES) / 1.5, 10);
    // Twice the CPU, half the ceiling.
    expect(cpuCeiling(100_000, account(3), 200_000)).toBeCloseTo(cpuCeiling(100_000, account(1.5), 200_000) / 2, 10);
  });

  it("is unknown without a CPU figure, and the log note then says nothing", () => {
    expect(cpuCeiling(100_000, account(NaN), 200_000)).toBeNaN();
    expect(ceilingNote(NaN, NaN)).toBe("");
    expect(ceilingNote(0.61, 1.31)).toBe(`; at its CPU cost at most 0.61x (1.31 core-s on ${MACHINE_CORES} cores)`);
  });
});
