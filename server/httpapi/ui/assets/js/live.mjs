// useLive loads a view's data and loads it again when the event stream
// reports a change on one of its topics, when the token changes, and, for
// data the stream does not carry (raft, autopilot), every `every` ms. With
// `match`, only events it accepts load again (a detail view's object, by
// the event's key or payload) rather than every event of the topics.
import { useEffect, useState } from '../vendor/preact-hooks.mjs';
import { onEvents } from './events.mjs';

export function useLive(load, deps, { topics = [], match = null, every = 0 } = {}) {
  const [state, setState] = useState({ data: null, error: null });
  useEffect(() => {
    let alive = true;
    let running = false;
    let again = false;
    const ctl = new AbortController();
    // At most one load in flight; changes during it cause one more, so a
    // burst of events costs two loads, not one per event.
    const reload = async () => {
      if (running) {
        again = true;
        return;
      }
      running = true;
      do {
        again = false;
        try {
          const data = await load(ctl.signal);
          if (alive) setState({ data, error: null });
        } catch (error) {
          if (alive && error.name !== 'AbortError') setState((s) => ({ data: s.data, error }));
        }
      } while (again && alive);
      running = false;
    };
    // Events without a key are the stream's catch-up after a drop: they
    // may stand for any object, so they always count.
    const touches = (e) => topics.includes(e.topic) && (!e.key || match(e));
    const onBatch = (batch) => {
      if (!match || batch.events.some(touches)) reload();
    };
    reload();
    const stop = topics.length ? onEvents(topics, onBatch) : () => {};
    const timer = every ? setInterval(reload, every) : 0;
    window.addEventListener('drover-token', reload);
    return () => {
      alive = false;
      ctl.abort();
      stop();
      clearInterval(timer);
      window.removeEventListener('drover-token', reload);
    };
  }, deps);
  return state;
}
