// CPU time per process of a running `wrangler dev`, from /proc (Linux): wrangler's node
// process, its proxy workerd (the ProxyWorker in front of the worker) and the worker's
// own workerd, plus this process (the benchmark's client and mock model).

import { readFileSync, readdirSync } from 'node:fs';
import { execSync } from 'node:child_process';

const TICK_MS = 1000 / Number(execSync('getconf CLK_TCK').toString().trim() || 100);

/** The role of a process of the group, from its command line. */
function role(cmdline) {
  if (cmdline.includes('workerd')) return cmdline.includes('entry=127.0.0.1:0') ? 'worker workerd' : 'proxy workerd';
  if (cmdline.includes('wrangler')) return 'wrangler node';
  return null;
}

/** CPU ms so far by role, for the processes of process group `pgid`, and this process. */
export function cpuByRole(pgid) {
  const out = {};
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    let stat;
    let cmdline;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
    } catch {
      continue; // gone
    }
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(fields[2]) !== pgid) continue; // field 5: pgrp
    const name = role(cmdline);
    if (!name) continue;
    const ticks = Number(fields[11]) + Number(fields[12]); // utime + stime
    out[name] = (out[name] ?? 0) + ticks * TICK_MS;
  }
  const self = process.cpuUsage();
  out['client and mock'] = (self.user + self.system) / 1000;
  return out;
}

/** CPU ms per unit spent by each role between two samples. */
export function perUnit(before, after, units) {
  const out = {};
  for (const [name, ms] of Object.entries(after)) {
    out[name] = Math.round(((ms - (before[name] ?? 0)) / units) * 100) / 100;
  }
  out.total = Math.round(Object.values(out).reduce((a, b) => a + b, 0) * 100) / 100;
  return out;
}
