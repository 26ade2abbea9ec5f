// Whether Node's event loop kept running while a test waited: the longest gap between the ticks of a 10 ms timer.
// A store that blocked the loop while waiting for another process's lock shows a gap as long as the wait; a loaded
// machine only delays ticks a little.

export function watchEventLoop(): { longestGapMs(): number; stop(): void } {
  let last = Date.now();
  let longest = 0;
  const timer = setInterval(() => {
    const now = Date.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 10);
  return {
    longestGapMs: () => Math.max(longest, Date.now() - last),
    stop: () => clearInterval(timer),
  };
}
