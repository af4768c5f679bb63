// Small DOM helpers: elements from a tag, attributes and children; JSON as a tree.

type Child = Node | string;

/** An element; `on…` attributes that are functions become listeners. */
export function h(tag: string, attrs: Record<string, unknown> = {}, ...children: Child[]): HTMLElement {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (typeof v === 'function') el.addEventListener(k.slice(2), v as EventListener);
    else if (v === true) el.setAttribute(k, '');
    else if (v !== undefined && v !== false) el.setAttribute(k, String(v));
  }
  el.append(...children);
  return el;
}

export function text(s: string): Text {
  return document.createTextNode(s);
}

/** A JSON value as nested lists: objects and arrays fold (open), leaves show their JSON. */
export function jsonTree(value: unknown, key?: string): HTMLElement {
  const label = key === undefined ? [] : [h('span', { class: 'key' }, key), ': '];
  if (value === null || typeof value !== 'object') {
    return h('div', { class: 'leaf' }, ...label, JSON.stringify(value) ?? 'undefined');
  }
  const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v] as const) : Object.entries(value);
  const size = Array.isArray(value) ? `[${entries.length}]` : `{${entries.length}}`;
  return h(
    'details',
    { open: true },
    h('summary', {}, ...label, size),
    h('ul', {}, ...entries.map(([k, v]) => h('li', {}, jsonTree(v, k)))),
  );
}
