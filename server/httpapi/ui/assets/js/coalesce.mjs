// coalesced runs an async job on demand, never two at once: a demand
// while it runs asks for one more run after it, however many demands come,
// so a burst of events costs at most two runs. minGap spaces the starts of
// runs, bounding what a busy cluster's events cost the servers.

/** Returns trigger(): runs job(), now or after the run in flight. Errors
 * go to onError. stop() drops what is queued. */
export function coalesced(job, { minGap = 0, onError = () => {} } = {}) {
  let running = false;
  let again = false;
  let stopped = false;
  let lastStart = -Infinity;
  const wait = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const trigger = async () => {
    if (running) {
      again = true;
      return;
    }
    running = true;
    do {
      again = false;
      const gap = lastStart + minGap - performance.now();
      if (gap > 0) await wait(gap);
      if (stopped) break;
      lastStart = performance.now();
      try {
        await job();
      } catch (e) {
        onError(e);
      }
    } while (again && !stopped);
    running = false;
  };
  trigger.stop = () => {
    stopped = true;
  };
  return trigger;
}
