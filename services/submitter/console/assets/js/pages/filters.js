// The filter form the list pages share: its fields write the route's query
// (#/tasks?type=...&status=...), so a filtered list is a link to share.

import { api } from '../api.js';
import { h } from '../dom.js';

// typeNames lists the registered task types, for a select.
export async function typeNames() {
  const list = await api('GET', '/v1/types');
  return list.types.map((t) => t.name);
}

// filterForm builds a form of fields ({name, label, options | checkbox |
// type, placeholder, toQuery/fromQuery to convert a value}) whose submission navigates to route with the values
// as its query; empty values are left out.
export function filterForm(route, current, fields) {
  const inputs = fields.map((f) => {
    const id = 'f-' + f.name;
    let input;
    if (f.options) {
      input = h('select', { id, name: f.name },
        h('option', { value: '', text: 'any' }),
        f.options.map((o) => h('option', { value: o, text: o, selected: current.get(f.name) === o })));
    } else if (f.checkbox) {
      input = h('input', { id, name: f.name, type: 'checkbox', checked: current.get(f.name) === 'true' });
    } else {
      const v = current.get(f.name) || '';
      input = h('input', { id, name: f.name, type: f.type || 'text', placeholder: f.placeholder || '', value: f.fromQuery ? f.fromQuery(v) : v });
    }
    return { f, input, el: h('label', { for: id }, f.label, input) };
  });
  const form = h('form', { class: 'filters' }, inputs.map((i) => i.el), h('button', { type: 'submit', text: 'Apply' }));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const { f, input } of inputs) {
      const v = f.checkbox ? (input.checked ? 'true' : '') : f.toQuery ? f.toQuery(input.value) : input.value.trim();
      if (v) q.set(f.name, v);
    }
    const s = q.toString();
    location.hash = route + (s ? '?' + s : '');
  });
  return form;
}
