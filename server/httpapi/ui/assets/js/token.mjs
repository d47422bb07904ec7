// The token box: the ACL token secret this tab sends as X-Drover-Token,
// kept in session storage (docs/ui.md).
import { html } from './html.mjs';
import { useState } from '../vendor/preact-hooks.mjs';
import { getToken, setToken } from './api.mjs';

export function TokenBox() {
  const [value, setValue] = useState(getToken());
  const [saved, setSaved] = useState(getToken());
  const save = (e) => {
    e.preventDefault();
    setToken(value.trim());
    setSaved(value.trim());
  };
  return html`
    <form class="token" onSubmit=${save}>
      <input type="password" id="token" placeholder="ACL token" aria-label="ACL token" autocomplete="off"
        value=${value} onInput=${(e) => setValue(e.currentTarget.value)} />
      <button type="submit">${saved && saved === value ? 'Saved' : 'Use token'}</button>
    </form>`;
}
