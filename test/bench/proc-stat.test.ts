import { spawn } from "node:child_process";
import { once } from "node:events";
import { processCpuMs } from "../../scripts/lib/proc-stat";

const onLinux = process.platform === "linux" ? describe : describe.skip;

onLinux("processCpuMs", () => {
  it("reads a busy process's CPU time, even when its name holds spaces and parentheses", async () => {
    // Spins for 400 ms of CPU under a name that would shift naive field splitting, then waits to be killed.
    const child = spawn(
      process.execPath,
      ["-e", "process.title = 'x) (y z'; const end = Date.now() + 400; while (Date.now() < end); console.log('spun'); setInterval(() => {}, 1000);"],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    try {
      await once(child.stdout!, "data");
      const spent = processCpuMs(child.pid);
      expect(spent).toBeGreaterThanOrEqual(300);
      expect(spent).toBeLessThan(5_000);
    } finally {
      child.kill();
    }
  });

  it("is undefined for a process that does not exist", () => {
    expect(processCpuMs(999_999_999)).toBeUndefined();
    expect(processCpuMs(undefined)).toBeUndefined();
  });
});
