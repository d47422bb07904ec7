// html is the UI's one way to write markup: htm's tagged templates turned
// into Preact elements, so there is no JSX and so no build step.
import { h, render } from '../vendor/preact.mjs';
import htm from '../vendor/htm.mjs';

export const html = htm.bind(h);
export { render };
