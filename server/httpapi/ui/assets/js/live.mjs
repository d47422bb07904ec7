// useLive loads a view's data and loads it again when the event stream
// reports a change on one of its topics, when the token changes, and, for
// data the stream does not carry (raft, autopilot), every `every` ms.
import { useEffect, useState } from '../vendor/preact-hooks.mjs';
import { coalesced } from './coalesce.mjs';
import { onEvents, onStreamState } from './events.mjs';

// How often a view with topics loads again while the token may not read
// the event stream.
const refusedPoll = 5000;

/** match(event) narrows the events that cause a load (a detail view's
 * object and what belongs to it); an event without a key (the stream
 * reconnected and may have missed some) always does. */
export function useLive(load, deps, { topics = [], every = 0, match = null } = {}) {
  const [state, setState] = useState({ data: null, error: null });
  useEffect(() => {
    let alive = true;
    const ctl = new AbortController();
    // At most one load in flight; changes during it cause one more, so a
    // burst of events costs two loads, not one per event.
    const reload = coalesced(async () => {
      try {
        const data = await load(ctl.signal);
        if (alive) setState({ data, error: null });
      } catch (error) {
        if (alive && error.name !== 'AbortError') setState((s) => ({ data: s.data, error }));
      }
    });
    reload();
    const touched = (batch) => (batch.events || []).some((e) => topics.includes(e.topic) && (!e.key || match(e)));
    const stop = topics.length ? onEvents(topics, match ? (batch) => touched(batch) && reload() : reload) : () => {};
    const timer = every ? setInterval(reload, every) : 0;
    let poll = 0;
    const stopState = topics.length ? onStreamState((state) => {
      clearInterval(poll);
      poll = state === 'refused' ? setInterval(reload, refusedPoll) : 0;
    }) : () => {};
    window.addEventListener('drover-token', reload);
    return () => {
      alive = false;
      reload.stop();
      ctl.abort();
      stop();
      clearInterval(timer);
      clearInterval(poll);
      stopState();
      window.removeEventListener('drover-token', reload);
    };
  }, deps);
  return state;
}
