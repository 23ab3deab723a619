import { spawn } from "node:child_process";
import { once } from "node:events";
import { cpuSince, cpuSnapshot } from "../../scripts/bench/cpu";
import { machineBusyMs, processCpuMs } from "../../scripts/lib/proc-stat";

const onLinux = process.platform === "linux" ? describe : describe.skip;

onLinux("processCpuMs", () => {
  it("reads a busy process's CPU time, even when its name holds spaces and parentheses", async () => {
    // Spins until it has used 400 ms of CPU (not of wall-clock time: a loaded machine gives it less CPU
    // per second), under a name that would shift naive field splitting, then waits to be killed.
    const spin =
      "process.title = 'x) (y z'; const cpuMs = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };" +
      " while (cpuMs() < 400); console.log('spun'); setInterval(() => {}, 1000);";
    const child = spawn(
      process.execPath,
      ["-e", spin],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    try {
      await once(child.stdout!, "data");
      const spent = processCpuMs(child.pid);
      // /proc counts in 10 ms clock ticks, sampled: a few ticks of slack below what the process measured itself.
      expect(spent).toBeGreaterThanOrEqual(350);
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

onLinux("machineBusyMs and the CPU account of a measurement", () => {
  it("counts a busy child's CPU in the machine's busy time and in its own line; the rest is what no named process used", async () => {
    const spin = "const cpuMs = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; }; while (cpuMs() < 400); console.log('spun'); setInterval(() => {}, 1000);";
    const child = spawn(process.execPath, ["-e", spin], { stdio: ["ignore", "pipe", "inherit"] });
    const busyBefore = machineBusyMs()!;
    const before = cpuSnapshot({ child: child.pid });
    try {
      await once(child.stdout!, "data");
      const account = cpuSince(before);
      expect(machineBusyMs()! - busyBefore).toBeGreaterThanOrEqual(350);
      expect(account.processes.child).toBeGreaterThanOrEqual(0.35);
      expect(account.machine).toBeGreaterThanOrEqual(account.processes.child - 0.05);
      expect(account.rest).toBeCloseTo(account.machine - account.processes.child - account.self, 6);
      expect(account.wallSeconds).toBeGreaterThan(0);
    } finally {
      child.kill();
    }
  });
});
