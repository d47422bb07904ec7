// Action is a button for a write that asks before it acts and shows the
// API's error when the write is refused. The question is inline rather than
// window.confirm, which blocks the page (and the browser tests).
import { html } from './html.mjs';
import { useState } from '../vendor/preact-hooks.mjs';
import { ErrorBox } from './util.mjs';

export function Action({ name, label, question, run }) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const go = async () => {
    setBusy(true);
    try {
      await run();
      setAsking(false);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const ask = () => {
    setError(null);
    setAsking(true);
  };
  return html`
    <span class="action" data-action=${name}>
      ${asking
        ? html`<span class="confirm" role="group">${question}
            <button type="button" data-confirm onClick=${go} disabled=${busy}>Confirm</button>
            <button type="button" onClick=${() => setAsking(false)} disabled=${busy}>Cancel</button></span>`
        : html`<button type="button" onClick=${ask}>${label}</button>`}
      <${ErrorBox} error=${error} />
    </span>`;
}
