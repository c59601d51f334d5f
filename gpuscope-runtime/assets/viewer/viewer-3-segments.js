  // gpuscope memory viewer, part 3 of 3: the segment map, the live allocations, and
  // the first draw.
  // ---------------------------------------------------------------- segment map
  var segmap = document.getElementById('segmap');
  var ROW_H = 16, ROW_GAP = 4, SEG_GAP = 3, MIN_SEG_PX = 6;
  var segLayout = null;
  var selectedBlock = -1;
  var blocksBySeg = [];
  D.segments.forEach(function () { blocksBySeg.push([]); });
  D.blocks.forEach(function (b, i) { if (blocksBySeg[b[0]]) blocksBySeg[b[0]].push(i); });
  var STATE_NAMES = ['allocated', 'pending free', 'free'];

  function blockColor(b) {
    if (b[3] === 2) return '#eaeef2';
    if (b[3] === 1) return '#fb8f44';
    return b[4] >= 0 ? groupColor(b[4]) : '#bfc5cc';
  }
  function isLeaked(b) { return b[6] >= 0 && !!D.tensors[b[6]].leakedFrom; }

  function drawSegments() {
    var t0 = performance.now();
    var S = D.segments.length;
    var w = segmap.clientWidth;
    if (S === 0) {
      var cv0 = setupCanvas(segmap, 40);
      cv0.ctx.fillStyle = '#656d76';
      cv0.ctx.font = '13px system-ui, sans-serif';
      cv0.ctx.fillText('No segments: nothing is reserved.', 8, 24);
      V.drawn.segments = 0;
      V.drawn.blocks = 0;
      segLayout = null;
      return;
    }
    // Bytes per pixel: every segment at least MIN_SEG_PX wide, and all of them in two
    // rows for a few segments, up to 24 for many.
    var total = 0;
    D.segments.forEach(function (s) { total += s[1]; });
    var targetRows = Math.min(24, Math.max(2, Math.ceil(S / 2)));
    var bpp = Math.max(total / (w * targetRows), 1);
    var segPx = D.segments.map(function (s) { return Math.max(MIN_SEG_PX, s[1] / bpp); });
    // Flow the segments into rows, wrapping long ones.
    var pieces = []; // [seg, row, x, width, offsetPx]
    var row = 0, x = 0;
    for (var si = 0; si < S; si++) {
      var left = segPx[si], off = 0;
      if (x > 0 && x + Math.min(left, 40) > w) { row++; x = 0; }
      while (left > 0) {
        var take = Math.min(left, w - x);
        pieces.push([si, row, x, take, off]);
        left -= take; off += take; x += take;
        if (left > 0 || x >= w - SEG_GAP) { if (left > 0 || x >= w) { row++; x = 0; } }
      }
      x += SEG_GAP;
      if (x >= w) { row++; x = 0; }
    }
    var rows = row + (x > 0 ? 1 : 0);
    var cv = setupCanvas(segmap, Math.max(1, rows) * (ROW_H + ROW_GAP));
    var ctx = cv.ctx;
    ctx.clearRect(0, 0, cv.w, cv.h);
    var rowRects = [];
    for (var rr = 0; rr < rows; rr++) rowRects.push([]);
    var piecesBySeg = [];
    for (var s2 = 0; s2 < S; s2++) piecesBySeg.push([]);
    pieces.forEach(function (p) { piecesBySeg[p[0]].push(p); });
    var drawnBlocks = 0;
    var leakedRects = [];
    for (var s3 = 0; s3 < S; s3++) {
      var seg = D.segments[s3], scale = segPx[s3] / seg[1];
      var ps = piecesBySeg[s3];
      // Segment background.
      ps.forEach(function (p) {
        ctx.fillStyle = '#d0d7de';
        ctx.fillRect(p[2], p[1] * (ROW_H + ROW_GAP), p[3], ROW_H);
      });
      var bl = blocksBySeg[s3];
      for (var bi = 0; bi < bl.length; bi++) {
        var idx = bl[bi], b = D.blocks[idx];
        var b0 = b[1] * scale, b1 = (b[1] + b[2]) * scale;
        ctx.fillStyle = blockColor(b);
        var dim = selectedGroup >= 0 && b[4] !== selectedGroup && b[3] === 0;
        for (var pi = 0; pi < ps.length; pi++) {
          var p = ps[pi], p0 = p[4], p1 = p[4] + p[3];
          var lo = Math.max(b0, p0), hi = Math.min(b1, p1);
          if (hi <= lo) continue;
          var rx = p[2] + (lo - p0), ry = p[1] * (ROW_H + ROW_GAP), rw = Math.max(hi - lo, 0.5);
          ctx.globalAlpha = dim ? 0.3 : 1;
          ctx.fillRect(rx, ry, rw, ROW_H);
          ctx.globalAlpha = 1;
          if (rw >= 3) {
            ctx.fillStyle = '#ffffff';
            ctx.fillRect(rx + rw - 0.5, ry, 0.5, ROW_H);
            ctx.fillStyle = blockColor(b);
          }
          rowRects[p[1]].push([rx, rx + rw, idx]);
          if (isLeaked(b) || idx === selectedBlock) leakedRects.push([rx, ry, rw, idx]);
        }
        drawnBlocks++;
      }
    }
    // Leaked tensors: a red frame (a red mark when too thin to frame); the selected
    // block: a blue one.
    leakedRects.forEach(function (r) {
      var color = r[3] === selectedBlock ? '#0969da' : '#d1242f';
      if (r[2] >= 6) {
        ctx.lineWidth = 2;
        ctx.strokeStyle = color;
        ctx.strokeRect(r[0] + 1, r[1] + 1, r[2] - 2, ROW_H - 2);
      } else {
        ctx.fillStyle = color;
        ctx.fillRect(r[0] + r[2] / 2 - 1.5, r[1], 3, 4);
        ctx.fillRect(r[0] + r[2] / 2 - 1.5, r[1] + ROW_H - 4, 3, 4);
      }
    });
    rowRects.forEach(function (list) { list.sort(function (a, b) { return a[0] - b[0]; }); });
    segLayout = { rowRects: rowRects, rows: rows, pieces: pieces };
    V.drawn.segments = S;
    V.drawn.blocks = drawnBlocks;
    V.drawn.segmentRows = rows;
    V.timings.segments = performance.now() - t0;
  }
  function blockAt(px, py) {
    if (!segLayout) return -1;
    var r = Math.floor(py / (ROW_H + ROW_GAP));
    if (r < 0 || r >= segLayout.rows || py - r * (ROW_H + ROW_GAP) > ROW_H) return -1;
    var list = segLayout.rowRects[r], lo = 0, hi = list.length - 1, best = -1;
    while (lo <= hi) {
      var m = (lo + hi) >> 1;
      if (list[m][0] <= px) { best = m; lo = m + 1; } else hi = m - 1;
    }
    // Tiny blocks share pixels: take the last one starting at or before px that covers it.
    for (var j = best; j >= 0 && j > best - 8; j--) if (list[j][1] >= px) return list[j][2];
    return -1;
  }
  function blockLines(i) {
    var b = D.blocks[i], seg = D.segments[b[0]];
    var out = [];
    var s = siteName(b[5]);
    if (s) out.push('site ' + s);
    out.push(STATE_NAMES[b[3]] + ' block, ' + fmtBytes(b[2]) + ' at ' + hex(seg[0] + b[1]));
    if (b[6] >= 0) {
      var t = D.tensors[b[6]];
      out.push('tensor ' + t.dtype + '[' + t.shape.join(', ') + '], ' + fmtBytes(t.bytes) + ' (id ' + t.id + ')');
      if (t.scope) out.push('in scope `' + t.scope.name + '` (' + t.scope.site + ')');
      if (t.leakedFrom) out.push('LEAKED from scope `' + t.leakedFrom.name + '` (' + t.leakedFrom.site + ')');
    }
    out.push('segment ' + hex(seg[0]) + ', ' + fmtBytes(seg[1]) + ', ' + seg[3] + ' pool, stream ' + seg[2]);
    return out;
  }
  function showBlock(i) {
    selectedBlock = i;
    var b = D.blocks[i], seg = D.segments[b[0]], t = b[6] >= 0 ? D.tensors[b[6]] : null;
    showDetails(t ? (t.leakedFrom ? 'Leaked tensor' : 'Tensor') : 'Block', [
      ['site', siteName(b[5])],
      ['state', STATE_NAMES[b[3]]],
      ['size', fmtBytes(b[2])],
      ['address', hex(seg[0] + b[1])],
      ['dtype', t ? t.dtype : null],
      ['shape', t ? '[' + t.shape.join(', ') + ']' : null],
      ['tensor id', t ? t.id : null],
      ['scope', t && t.scope ? t.scope.name + ' (' + t.scope.site + ')' : null],
      ['leaked from', t && t.leakedFrom ? t.leakedFrom.name + ' (' + t.leakedFrom.site + ')' : null],
      ['segment', hex(seg[0]) + ', ' + fmtBytes(seg[1]) + ', ' + seg[3] + ', stream ' + seg[2]]
    ]);
    drawSegments();
    markRow(i);
  }
  segmap.addEventListener('mousemove', function (ev) {
    var rect = segmap.getBoundingClientRect();
    var i = blockAt(ev.clientX - rect.left, ev.clientY - rect.top);
    if (i < 0) { hideTip(); return; }
    showTip(blockLines(i).join('\n'), ev.clientX, ev.clientY);
  });
  segmap.addEventListener('mouseleave', hideTip);
  segmap.addEventListener('click', function (ev) {
    var rect = segmap.getBoundingClientRect();
    var i = blockAt(ev.clientX - rect.left, ev.clientY - rect.top);
    if (i >= 0) showBlock(i);
  });
  V.blockPoint = function (i) {
    if (!segLayout) return null;
    for (var r = 0; r < segLayout.rowRects.length; r++) {
      var list = segLayout.rowRects[r];
      for (var j = 0; j < list.length; j++) {
        if (list[j][2] === i) {
          // Scrolled into view first: a map of many segments is taller than the window.
          var top = segmap.getBoundingClientRect().top + r * (ROW_H + ROW_GAP);
          if (top < 0 || top + ROW_H > window.innerHeight) window.scrollBy(0, top - window.innerHeight / 2);
          var rect = segmap.getBoundingClientRect();
          return { x: rect.left + (list[j][0] + list[j][1]) / 2, y: rect.top + r * (ROW_H + ROW_GAP) + ROW_H / 2 };
        }
      }
    }
    return null;
  };

  // ---------------------------------------------------------------- live tensors
  var tbody = document.querySelector('#tensors tbody');
  var rowOfBlock = {};
  var live = [];
  D.blocks.forEach(function (b, i) { if (b[3] === 0) live.push(i); });
  live.sort(function (a, b) {
    var la = isLeaked(D.blocks[a]) ? 1 : 0, lb = isLeaked(D.blocks[b]) ? 1 : 0;
    return lb - la || D.blocks[b][2] - D.blocks[a][2];
  });
  var MAX_ROWS = 500;
  live.slice(0, MAX_ROWS).forEach(function (i) {
    var b = D.blocks[i], t = b[6] >= 0 ? D.tensors[b[6]] : null;
    var tr = el('tr', { 'data-block': String(i) });
    if (t && t.leakedFrom) tr.className = 'leaked';
    tr.appendChild(el('td', null, t ? (t.leakedFrom ? 'leaked' : 'live') : 'allocated'));
    tr.appendChild(el('td', { 'class': 'num' }, fmtBytes(b[2])));
    tr.appendChild(el('td', null, t ? t.dtype + '[' + t.shape.join(', ') + ']' : ''));
    tr.appendChild(el('td', { 'class': 'site' }, siteName(b[5]) || ''));
    tr.appendChild(el('td', null, t && t.leakedFrom ? t.leakedFrom.name : (t && t.scope ? t.scope.name : '')));
    tr.addEventListener('click', function () { showBlock(i); });
    rowOfBlock[i] = tr;
    tbody.appendChild(tr);
  });
  var caption = document.getElementById('tensors-caption');
  var nLeaked = live.filter(function (i) { return isLeaked(D.blocks[i]); }).length;
  caption.textContent = live.length + ' allocated block' + (live.length === 1 ? '' : 's') +
    (nLeaked ? ', ' + nLeaked + ' leaked (red)' : '') + (live.length > MAX_ROWS ? '; the ' + MAX_ROWS + ' largest shown' : '');
  V.drawn.tensorRows = Math.min(live.length, MAX_ROWS);
  function markRow(i) {
    Array.prototype.forEach.call(tbody.querySelectorAll('tr.selected'), function (r) { r.classList.remove('selected'); });
    if (rowOfBlock[i]) rowOfBlock[i].classList.add('selected');
  }

  // ---------------------------------------------------------------- go
  function drawAll() { drawChart(); drawSegments(); }
  var resizeTimer = null;
  window.addEventListener('resize', function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(drawAll, 100);
  });
  drawAll();
  V.timings.total = performance.now();
  V.timings.script = performance.now() - tStart;
  V.ready = true;
})();
