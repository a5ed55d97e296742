// The rdmaps dashboard: fetches /api/state twice a second and draws it.
// Charts are plain SVG drawn here (no library: docs/dashboard.md says why).
// Every text that comes from the job goes in through textContent, never as
// HTML.
'use strict';

const POLL_MS = 500;
const SVGNS = 'http://www.w3.org/2000/svg';
const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2',
  '#17becf', '#7f7f7f', '#bcbd22'];
let last = null;       // the newest state
let inflight = false;
let failures = 0;
let myAction = 0;      // id of the action this page asked for

function $(id) { return document.getElementById(id); }

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

function svg(tag, attrs) {
  const e = document.createElementNS(SVGNS, tag);
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  return e;
}

function fmt(v, digits) {
  if (v === null || v === undefined || !isFinite(v)) return '-';
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e6 || a < 1e-3)) return v.toExponential(2);
  return v.toFixed(digits === undefined ? (a >= 100 ? 0 : a >= 1 ? 2 : 4) : digits);
}

function bytes(v) {
  if (v === null || v === undefined || !isFinite(v)) return '-';
  const u = ['B/s', 'KiB/s', 'MiB/s', 'GiB/s'];
  let i = 0;
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return v.toFixed(i ? 1 : 0) + ' ' + u[i];
}

function replaceRows(tbody, rows) {
  while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
  for (const r of rows) tbody.appendChild(r);
}

// ---- cluster ----------------------------------------------------------------

function drawNodes(nodes) {
  const rows = nodes.map(n => {
    const tr = el('tr', {'data-role': n.role, 'data-rank': n.rank === null ? '' : n.rank,
      'data-state': n.state, 'class': 'node'});
    tr.appendChild(el('td', {}, n.id === null ? '-' : n.id));
    tr.appendChild(el('td', {}, n.role));
    tr.appendChild(el('td', {}, n.rank === null ? '-' : n.rank));
    tr.appendChild(el('td', {}, n.host + ':' + n.port));
    tr.appendChild(el('td', {}, n.pid));
    const st = el('td');
    st.appendChild(el('span', {'class': 'state state-' + n.state}, n.state));
    tr.appendChild(st);
    tr.appendChild(el('td', {}, n.clock === null ? '-' : n.clock));
    tr.appendChild(el('td', {}, n.cpu === null ? '-' : n.cpu.toFixed(2)));
    tr.appendChild(el('td', {}, n.hb_age_ms === null ? '-' : n.hb_age_ms + ' ms'));
    tr.appendChild(el('td', {}, n.transport));
    return tr;
  });
  replaceRows($('nodes').tBodies[0], rows);
}

function drawServers(nodes) {
  const rows = [];
  for (const n of nodes) {
    if (n.role !== 'server') continue;
    const tr = el('tr', {'class': 'server-row', 'data-rank': n.rank, 'data-state': n.state});
    tr.appendChild(el('td', {}, 'server ' + n.rank + ' (' + n.state + ')'));
    tr.appendChild(el('td', {}, 'all'));
    const shards = n.shards || [];
    tr.appendChild(el('td', {}, shards.reduce((a, s) => a + s.ring, 0)));
    tr.appendChild(el('td', {}, n.clock));
    tr.appendChild(el('td', {}, fmt(n.pushes_s, 0)));
    tr.appendChild(el('td', {}, fmt(n.pulls_s, 0)));
    tr.appendChild(el('td', {}, fmt(shards.reduce((a, s) => a + (s.applied_s || 0), 0), 0)));
    tr.appendChild(el('td', {}, bytes(n.in_Bps)));
    tr.appendChild(el('td', {}, bytes(n.out_Bps)));
    tr.appendChild(el('td', {}, n.ckpt_age_s === undefined || n.ckpt_age_s === null ? 'none'
      : n.ckpts + ' written, newest ' + fmt(n.ckpt_age_s, 1) + ' s ago' +
        (n.ckpt_fails ? ', ' + n.ckpt_fails + ' failed' : '')));
    rows.push(tr);
    for (const s of shards) {
      const r = el('tr', {'class': 'shard-row'});
      r.appendChild(el('td'));
      r.appendChild(el('td', {}, s.shard));
      r.appendChild(el('td', {}, s.ring));
      r.appendChild(el('td', {}, s.clock));
      r.appendChild(el('td', {}, '-'));
      r.appendChild(el('td', {}, fmt(s.pulls_s, 0)));
      r.appendChild(el('td', {}, fmt(s.applied_s, 0)));
      r.appendChild(el('td', {}, ''));
      r.appendChild(el('td', {}, ''));
      r.appendChild(el('td', {}, s.ckpt_clock ? 'clock ' + s.ckpt_clock : ''));
      rows.push(r);
    }
  }
  replaceRows($('servers').tBodies[0], rows);
}

// ---- curves -----------------------------------------------------------------

// "Nice" tick values covering [lo, hi].
function ticks(lo, hi, n) {
  if (!(hi > lo)) { hi = lo + 1; }
  const raw = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map(m => m * mag).find(s => s >= raw) || raw;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(v);
  return out;
}

function drawChart(box, name, series, events, upS) {
  const W = 600, H = 220, L = 56, R = 10, T = 10, B = 26;
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  for (const s of series) {
    s.t.forEach((t, i) => {
      const v = s.v[i];
      x0 = Math.min(x0, t); x1 = Math.max(x1, t);
      if (v !== null && isFinite(v)) { y0 = Math.min(y0, v); y1 = Math.max(y1, v); }
    });
  }
  if (!isFinite(x0)) { x0 = 0; x1 = 1; }
  x0 = Math.max(0, x0 - 0.02 * (x1 - x0));  // from the first report to now
  x1 = Math.max(x1, upS || 0, x0 + 1);
  if (!isFinite(y0)) { y0 = 0; y1 = 1; }
  if (y1 - y0 < 1e-12) { y0 -= 0.5; y1 += 0.5; }
  const pad = (y1 - y0) * 0.05; y0 -= pad; y1 += pad;
  const X = t => L + (t - x0) / (x1 - x0) * (W - L - R);
  const Y = v => T + (1 - (v - y0) / (y1 - y0)) * (H - T - B);

  const root = svg('svg', {'class': 'chart', 'viewBox': '0 0 ' + W + ' ' + H,
    'preserveAspectRatio': 'none', 'data-series': name});
  for (const v of ticks(y0, y1, 4)) {
    root.appendChild(svg('line', {'class': 'grid', x1: L, x2: W - R, y1: Y(v), y2: Y(v)}));
    const t = svg('text', {x: L - 4, y: Y(v) + 3, 'text-anchor': 'end'});
    t.textContent = fmt(v);
    root.appendChild(t);
  }
  for (const v of ticks(x0, x1, 6)) {
    const t = svg('text', {x: X(v), y: H - 8, 'text-anchor': 'middle'});
    t.textContent = fmt(v, v >= 10 || v === 0 ? 0 : 1) + ' s';
    root.appendChild(t);
  }
  root.appendChild(svg('line', {'class': 'axis', x1: L, x2: L, y1: T, y2: H - B}));
  root.appendChild(svg('line', {'class': 'axis', x1: L, x2: W - R, y1: H - B, y2: H - B}));
  for (const e of events) {
    const c = e.kind === 'death' ? '#d62728' : e.kind === 'checkpoint' ? '#1f5fbf'
      : (e.kind === 'restore' || e.kind === 'rejoin') ? '#2ca02c' : null;
    if (!c || e.t < x0 || e.t > x1) continue;
    const m = svg('line', {x1: X(e.t), x2: X(e.t), y1: T, y2: H - B, stroke: c,
      'stroke-dasharray': '3,3', 'class': 'event-mark'});
    const tt = svg('title'); tt.textContent = e.text; m.appendChild(tt);
    root.appendChild(m);
  }
  const legend = el('div', {'class': 'legend'});
  series.forEach((s, k) => {
    const color = COLORS[s.worker % COLORS.length];
    // a gap (a value that is not finite) breaks the line
    let pts = [];
    const flush = () => {
      if (pts.length) root.appendChild(svg('polyline', {points: pts.join(' '), stroke: color,
        'data-worker': s.worker, 'data-points': pts.length}));
      pts = [];
    };
    s.t.forEach((t, i) => {
      const v = s.v[i];
      if (v === null || !isFinite(v)) { flush(); return; }
      pts.push(X(t).toFixed(1) + ',' + Y(v).toFixed(1));
    });
    flush();
    if (s.t.length < 40) {
      s.t.forEach((t, i) => {
        if (s.v[i] !== null && isFinite(s.v[i]))
          root.appendChild(svg('circle', {cx: X(t), cy: Y(s.v[i]), r: 2.2, fill: color}));
      });
    }
    const item = el('span');
    const swatch = el('i');
    swatch.style.background = color;  // CSSOM: the page's CSP allows no style attributes
    item.appendChild(swatch);
    const lastV = s.v.length ? s.v[s.v.length - 1] : null;
    item.appendChild(document.createTextNode('worker ' + s.worker + ': ' + fmt(lastV) +
      ' (' + s.total + ' reports' + (s.stride > 1 ? ', 1 in ' + s.stride + ' kept' : '') + ')'));
    legend.appendChild(item);
  });
  while (box.firstChild) box.removeChild(box.firstChild);
  box.appendChild(el('h3', {}, name));
  box.appendChild(root);
  box.appendChild(legend);
}

function drawCharts(st) {
  const byName = new Map();
  for (const s of st.series) {
    if (!byName.has(s.name)) byName.set(s.name, []);
    byName.get(s.name).push(s);
  }
  $('no-curves').style.display = byName.size ? 'none' : '';
  for (const [name, list] of byName) {
    const id = 'chart-' + name.replace(/[^A-Za-z0-9_-]/g, '_');
    let box = $(id);
    if (!box) {
      box = el('div', {'class': 'chart-box', id: id});
      $('charts').appendChild(box);
    }
    list.sort((a, b) => a.worker - b.worker);
    drawChart(box, name, list, st.events, st.job.up_s);
  }
}

// ---- events -----------------------------------------------------------------

function drawEvents(st) {
  const ol = $('events');
  const items = st.events.slice().reverse().map(e => {
    const li = el('li', {'class': 'ev-' + e.kind, 'data-kind': e.kind});
    li.appendChild(el('span', {'class': 'kind'}, e.kind));
    li.appendChild(document.createTextNode('+' + fmt(e.t, 1) + ' s  ' + e.text));
    return li;
  });
  replaceRows(ol, items);
  const tl = $('timeline');
  while (tl.firstChild) tl.removeChild(tl.firstChild);
  const span = Math.max(st.job.up_s, 1);
  tl.appendChild(svg('line', {x1: 0, x2: 1000, y1: 20, y2: 20, stroke: '#9aa1b0'}));
  for (const e of st.events) {
    const c = e.kind === 'death' ? '#d62728' : e.kind === 'checkpoint' ? '#1f5fbf'
      : e.kind === 'action' ? '#b58900' : e.kind === 'left' ? '#7f7f7f' : '#2ca02c';
    const x = (e.t / span * 990 + 5).toFixed(1);
    const m = svg('circle', {cx: x, cy: 20, r: 5, fill: c});
    const tt = svg('title'); tt.textContent = '+' + fmt(e.t, 1) + ' s ' + e.text;
    m.appendChild(tt);
    tl.appendChild(m);
  }
}

// ---- the job line, actions --------------------------------------------------

function drawJob(st) {
  const j = st.job;
  $('job-state').textContent = j.state;
  const alive = r => st.nodes.filter(n => n.role === r && n.state === 'alive').length;
  $('job-line').textContent = 'scheduler ' + j.scheduler + ' · up ' + fmt(j.up_s, 1) +
    ' s · map epoch ' + j.epoch + ' · servers ' + alive('server') + '/' + j.num_servers +
    ' alive · workers ' + alive('worker') + '/' + j.num_workers + ' alive · heartbeat timeout ' +
    j.hb_timeout_ms + ' ms' + (j.events_total > st.events.length
      ? ' · ' + (j.events_total - st.events.length) + ' older events not shown' : '');
  const a = st.action;
  if (myAction && a.id === myAction) {
    const r = $('action-result');
    if (a.state === 'done') {
      r.className = 'ok';
      r.textContent = a.op + ' done' + (a.op === 'export' ? ': ' + a.why
        : (a.clock ? ' at clock ' + a.clock : '') + ': ' + a.files.join(', '));
    } else if (a.state === 'failed') {
      r.className = 'error';
      r.textContent = a.op + ' failed: ' + a.why;
    } else {
      r.className = 'hint';
      r.textContent = a.op + ' ' + a.state + '...';
    }
  }
}

async function act(what) {
  const r = $('action-result');
  const secret = $('secret').value;
  r.className = 'hint';
  r.textContent = 'asking for ' + what + '...';
  let resp, body = {};
  try {
    const headers = {};
    if (secret) headers['Authorization'] = 'Bearer ' + secret;
    resp = await fetch('api/' + what, {method: 'POST', headers: headers, cache: 'no-store'});
    body = await resp.json().catch(() => ({}));
  } catch (e) {
    r.className = 'error';
    r.textContent = what + ': the scheduler did not answer (' + e.message + ')';
    return;
  }
  if (resp.status === 202) {
    myAction = body.id;
    r.textContent = what + ' queued...';
    return;
  }
  r.className = 'error';
  r.textContent = what + ' refused (' + resp.status + '): ' + (body.error || resp.statusText);
}

function draw(st) {
  drawJob(st);
  drawNodes(st.nodes);
  drawServers(st.nodes);
  drawCharts(st);
  drawEvents(st);
}

async function poll() {
  if (inflight) return;
  inflight = true;
  try {
    const resp = await fetch('api/state', {cache: 'no-store'});
    if (resp.status === 503) return;
    if (!resp.ok) throw new Error('HTTP ' + resp.status);
    last = await resp.json();
    failures = 0;
    $('conn').textContent = 'updated ' + new Date().toLocaleTimeString();
    $('conn').className = 'conn ok';
    draw(last);
  } catch (e) {
    failures++;
    $('conn').textContent = 'scheduler unreachable (' + e.message + '): the job may have ended';
    $('conn').className = 'conn lost';
  } finally {
    inflight = false;
  }
}

$('btn-checkpoint').addEventListener('click', () => act('checkpoint'));
$('btn-export').addEventListener('click', () => act('export'));
$('actions').addEventListener('submit', ev => ev.preventDefault());
poll();
setInterval(poll, POLL_MS);
