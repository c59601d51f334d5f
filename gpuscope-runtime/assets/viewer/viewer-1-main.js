// gpuscope memory viewer, part 1 of 3 (viewer-*.js are joined in order into one
// script): the data, helpers, summary, legend, details and tooltip.
// gpuscope memory viewer: reads the JSON in #gpuscope-data and draws, on canvases,
// allocated memory over time stacked by creating site (with reserved memory as a line),
// the segment map, and the live tensors. No network, no library.
(function () {
  'use strict';
  var V = (window.gpuscopeViewer = { drawn: {}, timings: {}, ready: false });
  var tStart = performance.now();
  // Several devices: one data element each (#gpuscope-data-N) and a selector. The
  // address's fragment (#device=N) says which is shown; choosing another sets it, and
  // a changed fragment reloads the page, which then draws that device from scratch.
  var dataNode = document.getElementById('gpuscope-data');
  var picker = document.getElementById('device');
  V.device = 0;
  if (!dataNode && picker) {
    var m = /^#device=(\d+)$/.exec(window.location.hash);
    V.device = m && document.getElementById('gpuscope-data-' + m[1]) ? Number(m[1]) : 0;
    dataNode = document.getElementById('gpuscope-data-' + V.device);
    dataNode.id = 'gpuscope-data'; // the shown device's data, where a one-device page has it
    picker.value = String(V.device);
    picker.addEventListener('change', function () {
      window.location.hash = 'device=' + picker.value;
    });
    window.addEventListener('hashchange', function () { window.location.reload(); });
  }
  var D = JSON.parse(dataNode.textContent);
  V.timings.parse = performance.now() - tStart;

  // ---------------------------------------------------------------- helpers
  var UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  function fmtBytes(b) {
    var neg = b < 0;
    b = Math.abs(b);
    if (b < 1024) return (neg ? '-' : '') + Math.round(b) + ' B';
    var u = 0;
    while (b >= 1024 && u < UNITS.length - 1) { b /= 1024; u++; }
    return (neg ? '-' : '') + b.toFixed(2) + ' ' + UNITS[u];
  }
  function fmtTime(ns) {
    if (ns < 1e3) return ns.toFixed(0) + ' ns';
    if (ns < 1e6) return (ns / 1e3).toFixed(1) + ' µs';
    if (ns < 1e9) return (ns / 1e6).toFixed(2) + ' ms';
    return (ns / 1e9).toFixed(3) + ' s';
  }
  function hex(n) { return '0x' + Math.round(n).toString(16); }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) for (var a in attrs) e.setAttribute(a, attrs[a]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  var PALETTE = ['#4e79a7', '#59a14f', '#e15759', '#76b7b2', '#edc948',
    '#b07aa1', '#ff9da7', '#9c755f', '#2f6f8f', '#8cd17d', '#d37295', '#86bcb6',
    '#fabfd2', '#b6992d', '#499894'];
  function groupColor(g) {
    if (g === 0) return '#8b949e'; // allocated before the history
    if (g === 1) return '#7a9cc6'; // no site recorded
    if (g === 2) return '#6e7781'; // other sites
    return PALETTE[(g - 3) % PALETTE.length];
  }
  var groups = D.groups;
  var G = groups.length;
  var sites = D.sites;
  function siteName(i) { return i >= 0 && i < sites.length ? sites[i] : null; }

  // ---------------------------------------------------------------- summary
  document.getElementById('title').textContent = D.title;
  var H = D.history || null;
  var n = H ? H.k.length : 0;
  var summary = document.getElementById('summary');
  function addFact(label, value) {
    summary.appendChild(document.createTextNode(label + ' '));
    summary.appendChild(el('b', null, value));
    summary.appendChild(document.createTextNode('   '));
  }
  addFact('device', D.device);
  addFact('allocated', fmtBytes(D.allocated));
  addFact('reserved', fmtBytes(D.reserved));
  addFact('segments', String(D.segments.length));
  addFact('blocks', String(D.blocks.length));
  addFact('events', H ? n + (H.dropped ? ' (' + H.dropped + ' older dropped)' : '') : 'no history');

  // ---------------------------------------------------------------- history
  var kind, size, grp, site, time, allocAfter, resAfter;
  var peakAlloc = 0, peakRes = 0, groupPeak = new Float64Array(G);
  var tPrep = performance.now();
  if (H) {
    kind = Int8Array.from(H.k);
    size = Float64Array.from(H.s);
    grp = Int32Array.from(H.g);
    site = Int32Array.from(H.x);
    time = new Float64Array(n);
    allocAfter = new Float64Array(n);
    resAfter = new Float64Array(n);
    var tt = 0, a = H.baseAllocated, r = H.baseReserved;
    var cur = new Float64Array(G);
    cur[0] = H.baseAllocated;
    groupPeak[0] = cur[0];
    for (var i = 0; i < n; i++) {
      tt += H.t[i];
      time[i] = tt;
      var k = kind[i], s = size[i], g = grp[i];
      if (k === 0) { a += s; cur[g] += s; if (cur[g] > groupPeak[g]) groupPeak[g] = cur[g]; }
      else if (k === 1) { a -= s; cur[g] -= s; }
      else if (k === 2) r += s;
      else r -= s;
      allocAfter[i] = a;
      resAfter[i] = r;
      if (a > peakAlloc) peakAlloc = a;
      if (r > peakRes) peakRes = r;
    }
    addFact('peak allocated', fmtBytes(peakAlloc));
    addFact('peak reserved', fmtBytes(peakRes));
  }
  // Groups present: with memory in the history or in an allocated block.
  var blockGroupBytes = new Float64Array(G);
  D.blocks.forEach(function (b) { if (b[3] === 0 && b[4] >= 0) blockGroupBytes[b[4]] += b[2]; });
  var present = [];
  for (var gi = 0; gi < G; gi++) if (groupPeak[gi] > 0 || blockGroupBytes[gi] > 0) present.push(gi);
  // Stacking order, bottom to top: before the history, top sites, other sites, no site.
  var order = present.filter(function (g) { return g === 0; })
    .concat(present.filter(function (g) { return g >= 3; }))
    .concat(present.filter(function (g) { return g === 2; }))
    .concat(present.filter(function (g) { return g === 1; }));
  V.timings.prep = performance.now() - tPrep;

  // ---------------------------------------------------------------- legend
  var legend = document.getElementById('legend');
  var selectedGroup = -1;
  order.slice().reverse().forEach(function (g) {
    var item = el('div', { 'class': 'legend-item', 'data-group': String(g), title: groups[g].name });
    var sw = el('span', { 'class': 'swatch' });
    sw.style.background = groupColor(g);
    item.appendChild(sw);
    item.appendChild(el('span', { 'class': 'name' }, groups[g].name));
    item.appendChild(el('span', { 'class': 'bytes' }, fmtBytes(Math.max(groupPeak[g], blockGroupBytes[g]))));
    item.addEventListener('click', function () { showGroup(g); });
    legend.appendChild(item);
  });
  V.drawn.legend = order.length;

  // ---------------------------------------------------------------- details
  var details = document.getElementById('details');
  function showDetails(title, rows) {
    details.innerHTML = '';
    details.appendChild(el('h3', null, title));
    var dl = el('dl');
    rows.forEach(function (r) {
      if (r[1] === null || r[1] === undefined) return;
      dl.appendChild(el('dt', null, r[0]));
      dl.appendChild(el('dd', null, String(r[1])));
    });
    details.appendChild(dl);
  }
  function showGroup(g) {
    selectedGroup = g;
    Array.prototype.forEach.call(legend.children, function (c) {
      c.classList.toggle('selected', Number(c.getAttribute('data-group')) === g);
    });
    showDetails(groups[g].site >= 0 ? 'Allocation site' : groups[g].name, [
      ['site', groups[g].site >= 0 ? groups[g].name : null],
      ['peak (history)', H ? fmtBytes(groupPeak[g]) : null],
      ['live now', fmtBytes(blockGroupBytes[g])]
    ]);
    drawSegments();
  }

  // ---------------------------------------------------------------- tooltip
  var tip = document.getElementById('tooltip');
  function showTip(text, cx, cy) {
    tip.textContent = text;
    tip.style.display = 'block';
    var w = tip.offsetWidth, h = tip.offsetHeight;
    var x = cx + 14, y = cy + 14;
    if (x + w > window.innerWidth - 4) x = cx - w - 14;
    if (y + h > window.innerHeight - 4) y = cy - h - 14;
    tip.style.left = Math.max(4, x) + 'px';
    tip.style.top = Math.max(4, y) + 'px';
  }
  function hideTip() { tip.style.display = 'none'; }

  function setupCanvas(c, cssHeight) {
    var dpr = window.devicePixelRatio || 1;
    var w = c.clientWidth;
    c.style.height = cssHeight + 'px';
    c.width = Math.max(1, Math.round(w * dpr));
    c.height = Math.max(1, Math.round(cssHeight * dpr));
    var ctx = c.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    return { ctx: ctx, w: w, h: cssHeight };
  }

