(function () {
  'use strict';
  // Program output is hostile: it reaches the screen through textContent
  // only, never as markup. The page's state lives in the URL's fragment
  // (#verdict=false&item=ID...), so a view can be shared or reopened.
  var data = JSON.parse(document.getElementById('progscore-data').textContent);
  var items = data.items;
  var PAGE_SIZE = 100;
  var state = { verdict: '', profile: '', reason: '', q: '', sort: '', page: 1, item: '' };
  var byId = {};
  items.forEach(function (item, index) { item.index = index; byId[item.id] = item; });

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) { node.className = className; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }
  function $(id) { return document.getElementById(id); }
  function ms(value) {
    if (value == null) { return '-'; }
    return value >= 10000 ? (value / 1000).toFixed(1) + ' s' : value + ' ms';
  }
  function mib(bytes) {
    if (bytes == null) { return '-'; }
    return (bytes / 1048576).toFixed(1) + ' MiB';
  }
  function reasonOf(item) { return item.reason_kind || (item.verdict === 'undetermined' ? 'unknown' : ''); }

  function readHash() {
    var params = new URLSearchParams(location.hash.replace(/^#/, ''));
    state.verdict = params.get('verdict') || '';
    state.profile = params.get('profile') || '';
    state.reason = params.get('reason') || '';
    state.q = params.get('q') || '';
    state.sort = params.get('sort') || '';
    state.page = Math.max(1, parseInt(params.get('page') || '1', 10) || 1);
    state.item = params.get('item') || '';
  }
  function writeHash() {
    var params = new URLSearchParams();
    ['verdict', 'profile', 'reason', 'q', 'sort', 'item'].forEach(function (key) {
      if (state[key]) { params.set(key, state[key]); }
    });
    if (state.page > 1) { params.set('page', String(state.page)); }
    var text = params.toString();
    try {
      history.replaceState(null, '', text ? '#' + text : location.pathname + location.search);
    } catch (e) { /* a page opened from a restricted context keeps its URL */ }
  }

  function fillSelect(select, values) {
    values.forEach(function (value) {
      var option = el('option', null, value);
      option.value = value;
      select.appendChild(option);
    });
  }
  function distinct(pick) {
    var seen = {};
    items.forEach(function (item) { var value = pick(item); if (value) { seen[value] = true; } });
    return Object.keys(seen).sort();
  }

  function selected() {
    var q = state.q.toLowerCase();
    var list = items.filter(function (item) {
      return (!state.verdict || item.verdict === state.verdict) &&
        (!state.profile || item.profile === state.profile) &&
        (!state.reason || reasonOf(item) === state.reason) &&
        (!q || item.id.toLowerCase().indexOf(q) >= 0);
    });
    if (state.sort === 'duration-desc') {
      list.sort(function (a, b) { return b.duration_ms - a.duration_ms || a.index - b.index; });
    } else if (state.sort === 'duration-asc') {
      list.sort(function (a, b) { return a.duration_ms - b.duration_ms || a.index - b.index; });
    }
    return list;
  }

  function renderRows() {
    var list = selected();
    var pages = Math.max(1, Math.ceil(list.length / PAGE_SIZE));
    if (state.page > pages) { state.page = pages; }
    var start = (state.page - 1) * PAGE_SIZE;
    var body = $('item-rows');
    body.textContent = '';
    list.slice(start, start + PAGE_SIZE).forEach(function (item) {
      var row = el('tr', 'item-row');
      row.setAttribute('data-id', item.id);
      row.setAttribute('data-verdict', item.verdict);
      var cell = el('td');
      var link = el('a', 'open', item.id);
      link.href = '#item=' + encodeURIComponent(item.id);
      link.addEventListener('click', function (event) {
        event.preventDefault();
        state.item = item.id;
        writeHash();
        renderDetail();
      });
      cell.appendChild(link);
      row.appendChild(cell);
      row.appendChild(el('td', 'v-' + item.verdict, item.verdict));
      row.appendChild(el('td', 'number', item.score == null ? '-' : item.score.toFixed(4)));
      row.appendChild(el('td', null, item.profile));
      row.appendChild(el('td', null, reasonOf(item)));
      row.appendChild(el('td', 'number', ms(item.duration_ms)));
      body.appendChild(row);
    });
    var shown = list.length === 0 ? 'No item matches.' :
      'Items ' + (start + 1) + '\u2013' + Math.min(start + PAGE_SIZE, list.length) + ' of ' + list.length +
      (list.length !== items.length ? ' (filtered from ' + items.length + ')' : '') +
      '; page ' + state.page + ' of ' + pages + '.';
    $('page-info').textContent = shown;
    $('prev').disabled = state.page <= 1;
    $('next').disabled = state.page >= pages;
  }

  function cutNote(text, what) {
    if (!text || !text.cut) { return null; }
    return el('p', 'cut', 'Showing the first ' + data[what] + ' bytes of ' + text.bytes + '.');
  }
  function textBlock(parent, title, text, what) {
    parent.appendChild(el('h4', null, title));
    if (!text) { parent.appendChild(el('p', 'missing', 'not recorded')); return; }
    if (text.binary) { parent.appendChild(el('p', 'note', 'Not valid UTF-8: shown with replacement characters.')); }
    parent.appendChild(el('pre', 'text', text.text));
    var note = cutNote(text, what);
    if (note) { parent.appendChild(note); }
  }
  function streamBlock(parent, name, stream) {
    parent.appendChild(el('h4', null, name));
    if (!stream) { parent.appendChild(el('p', 'missing', 'not recorded')); return; }
    var pre = el('pre', 'text stream-' + name, stream.shown.text);
    parent.appendChild(pre);
    var facts = 'kept ' + stream.kept_bytes + ' of ' + stream.total_bytes + ' bytes';
    if (stream.truncated) { facts += ' (truncated by the sandbox: the rest was counted, not kept)'; }
    if (stream.shown.cut) { facts += '; the page shows the first ' + data.excerpt_bytes + ' bytes'; }
    if (stream.shown.binary) { facts += '; not valid UTF-8, shown with replacement characters'; }
    parent.appendChild(el('p', 'stream-facts', facts));
  }
  // An interactive case: each write as it crossed, inert text only.
  function conversationBlock(parent, conversation) {
    parent.appendChild(el('h4', null, 'conversation with the interactor'));
    var lines = conversation.turns.map(function (turn) {
      var arrow = turn.from === 'program' ? 'program    \u2192 ' : 'interactor \u2192 ';
      return (turn.at_ms.toFixed(2) + ' ms').padStart(12) + '  ' + arrow + turn.text.replace(/\n$/, '').split('\n').join('\n' + ' '.repeat(29));
    });
    parent.appendChild(el('pre', 'text conversation', lines.join('\n')));
    var facts = conversation.turns.length + ' of ' + conversation.total_turns + ' writes shown';
    if (conversation.cut) { facts += '; some bytes were counted, not kept'; }
    if (conversation.program_ended_ms != null) { facts += '; the program ended at ' + conversation.program_ended_ms.toFixed(1) + ' ms'; }
    if (conversation.interactor_ended_ms != null) { facts += ', the interactor at ' + conversation.interactor_ended_ms.toFixed(1) + ' ms'; }
    parent.appendChild(el('p', 'stream-facts', facts));
    var said = conversation.interactor_outcome + (conversation.interactor_exit_code == null ? '' : ' (exit code ' + conversation.interactor_exit_code + ')');
    table(parent, 'facts', [['interactor', said]]);
    streamBlock(parent, 'interactor stderr', conversation.interactor_stderr);
  }
  // What the program tried, as the sandbox traced it: inert text only.
  function behaviourBlock(parent, behaviour) {
    parent.appendChild(el('h4', null, 'behaviour'));
    if (behaviour.status !== 'traced') {
      parent.appendChild(el('p', 'missing', 'not traced: ' + behaviour.reason));
      return;
    }
    var counts = Object.keys(behaviour.counts || {}).map(function (kind) {
      return kind + ' ' + behaviour.counts[kind];
    });
    var facts = counts.length ? counts.join(', ') : 'nothing tried';
    if (behaviour.dropped) { facts += '; ' + behaviour.dropped + ' events counted, not kept'; }
    if (behaviour.incomplete) { facts += '; incomplete: ' + behaviour.incomplete; }
    parent.appendChild(el('p', 'behaviour-facts', facts));
    if (!(behaviour.events || []).length) { return; }
    var rows = behaviour.events.map(function (event) {
      var fields = Object.keys(event).filter(function (key) {
        return key !== 'at_ms' && key !== 'kind' && key !== 'result';
      }).map(function (key) {
        var value = event[key];
        return key + '=' + (typeof value === 'string' ? value : JSON.stringify(value));
      });
      return [ms(event.at_ms) + ' ' + event.kind, fields.join(' ') + (event.result ? ' → ' + event.result : '')];
    });
    table(parent, 'behaviour', rows);
  }
  function table(parent, className, rows) {
    var node = el('table', className);
    rows.forEach(function (pair) {
      var row = el('tr');
      row.appendChild(el('th', null, pair[0]));
      row.appendChild(el('td', null, pair[1]));
      node.appendChild(row);
    });
    parent.appendChild(node);
  }
  function diffBlock(parent, diff) {
    parent.appendChild(el('h4', null, 'diff of ' + diff.stream + ' (- expected, + observed)'));
    var box = el('div', 'diff');
    var names = { '=': 'eq', '-': 'del', '+': 'add' };
    var marks = { '=': '  ', '-': '- ', '+': '+ ' };
    diff.lines.forEach(function (pair) {
      box.appendChild(el('div', 'diff-line diff-' + names[pair[0]], marks[pair[0]] + pair[1]));
    });
    parent.appendChild(box);
    if (diff.cut) { parent.appendChild(el('p', 'cut', 'The diff is cut here.')); }
  }

  function renderDetail() {
    var panel = $('detail');
    var item = state.item ? byId[state.item] : null;
    panel.textContent = '';
    if (!item) { panel.hidden = true; return; }
    panel.hidden = false;
    var head = el('h2', null, item.id + ' ');
    head.appendChild(el('span', 'badge v-' + item.verdict, item.verdict));
    panel.appendChild(head);
    var close = el('button', 'close', 'close');
    close.type = 'button';
    close.addEventListener('click', function () { state.item = ''; writeHash(); renderDetail(); });
    panel.appendChild(close);
    panel.appendChild(el('p', 'rationale', item.rationale));
    if (item.reason) { panel.appendChild(el('p', 'reason', 'Reason (' + (item.reason_kind || 'failure') + '): ' + item.reason)); }
    if (item.before && item.before !== item.verdict) {
      panel.appendChild(el('p', 'changed', 'Changed: ' + item.before + ' \u2192 ' + item.verdict));
    }
    item.notes.forEach(function (note) { panel.appendChild(el('p', 'note', note)); });
    if (item.groups && item.groups.length > 0) {
      table(panel, 'groups', item.groups.map(function (group) {
        return [group.name, (group.earned == null ? 'undetermined' : group.earned) + ' of ' + group.points + ' point(s)'];
      }));
    }
    table(panel, 'facts', [
      ['profile', item.profile],
      ['score', item.score == null ? '-' : item.score.toFixed(4)],
      ['score id', item.score_id == null ? '-' : item.score_id],
      ['evidence', item.evidence || '-'],
      ['observation ids', item.observation_ids.join(', ') || '-'],
      ['program sha256', item.program_sha256 || '-'],
      ['wall time', ms(item.duration_ms)],
      ['CPU time', ms(item.cpu_ms)],
      ['peak memory', mib(item.peak_memory_bytes)]
    ]);
    textBlock(panel, 'Program (as it ran)', item.program, 'program_bytes');
    if (item.compile) {
      var build = el('div', 'case compile');
      var built = item.compile.outcome === 'exited' && item.compile.exit_code === 0;
      build.appendChild(el('h3', 'case-head case-' + (built ? 'matched' : 'failed'),
        'Compile: ' + (built ? 'built' : 'failed')));
      table(build, 'facts', [
        ['outcome', item.compile.outcome + (item.compile.exit_code == null ? '' : ' (exit code ' + item.compile.exit_code + ')')],
        ['command', JSON.stringify(item.compile.command)],
        ['wall time', ms(item.compile.duration_ms)],
        ['build sha256', item.compile.artifact_sha256 || '-']
      ]);
      streamBlock(build, 'stdout', item.compile.stdout);
      streamBlock(build, 'stderr', item.compile.stderr);
      panel.appendChild(build);
    }
    item.cases.forEach(function (c, index) {
      var box = el('div', 'case');
      var verdict = c.matched === true ? 'matched' : c.matched === false ? 'failed' : 'undetermined';
      box.appendChild(el('h3', 'case-head case-' + verdict, 'Case ' + (index + 1) + ': ' + verdict));
      table(box, 'facts', [
        ['outcome', c.outcome + (c.exit_code == null ? '' : ' (exit code ' + c.exit_code + ')')],
        ['detail', c.detail || '-'],
        ['arguments', JSON.stringify(c.args)],
        ['expected', JSON.stringify(c.expected, null, 1)],
        ['wall time', ms(c.duration_ms)],
        ['CPU time', ms(c.cpu_ms)],
        ['peak memory', mib(c.peak_memory_bytes)]
      ]);
      if (c.stdin) { textBlock(box, 'stdin', c.stdin, 'excerpt_bytes'); }
      if (c.diff) { diffBlock(box, c.diff); }
      streamBlock(box, 'stdout', c.stdout);
      streamBlock(box, 'stderr', c.stderr);
      if (c.behaviour) { behaviourBlock(box, c.behaviour); }
      if (c.conversation) { conversationBlock(box, c.conversation); }
      if (c.provenance != null) {
        var provenance = data.provenances[c.provenance];
        box.appendChild(el('h4', null, 'provenance'));
        var rows = Object.keys(provenance).map(function (key) {
          var value = provenance[key];
          return [key, typeof value === 'string' ? value : JSON.stringify(value)];
        });
        if (c.container) { rows.push(['container', c.container]); }
        table(box, 'provenance', rows);
      }
      panel.appendChild(box);
    });
    panel.scrollIntoView();
  }

  function bind(id, key) {
    var control = $(id);
    control.value = state[key];
    control.addEventListener(control.tagName === 'INPUT' ? 'input' : 'change', function () {
      state[key] = control.value;
      state.page = 1;
      writeHash();
      renderRows();
    });
  }

  fillSelect($('filter-profile'), distinct(function (item) { return item.profile; }));
  fillSelect($('filter-reason'), distinct(reasonOf));
  readHash();
  bind('filter-verdict', 'verdict');
  bind('filter-profile', 'profile');
  bind('filter-reason', 'reason');
  bind('filter-id', 'q');
  bind('sort', 'sort');
  $('prev').addEventListener('click', function () { state.page -= 1; writeHash(); renderRows(); });
  $('next').addEventListener('click', function () { state.page += 1; writeHash(); renderRows(); });
  window.addEventListener('hashchange', function () {
    readHash();
    ['filter-verdict', 'filter-profile', 'filter-reason', 'filter-id', 'sort'].forEach(function (id, i) {
      $(id).value = state[['verdict', 'profile', 'reason', 'q', 'sort'][i]];
    });
    renderRows();
    renderDetail();
  });
  renderRows();
  renderDetail();
}());
