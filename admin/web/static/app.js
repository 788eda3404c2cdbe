// xtimer console: the actions (pause, resume, run now, reset, delete,
// schedule edits), the HTTP callback task form, and the cron helper's
// live preview that both forms share. Every page reads without
// this file: lists, details and filters are server-rendered, and links
// are real links. The actions call the JSON API under the console's
// prefix (from <body data-prefix>), as any client would, with a JSON body
// so that the API's cross-site checks hold.
(function () {
  'use strict';

  var body = document.body;
  var prefix = body.getAttribute('data-prefix') || '/';
  var displayZone = body.getAttribute('data-zone') || 'UTC';
  var FINAL = { succeeded: true, failed: true, timed_out: true, skipped: true };
  var FLASH_KEY = 'xtimer-flash';
  var DONE = { pause: 'Paused', resume: 'Resumed', reset: 'Reset to the code default the schedule of',
    'reset-options': 'Reset to the code the options of' };

  document.documentElement.classList.add('js');

  // flash shows the result of an action in #flash, as text.
  function flash(message, isError, link) {
    var el = document.getElementById('flash');
    if (!el) return;
    el.textContent = message;
    el.classList.toggle('error', !!isError);
    if (link) {
      var a = document.createElement('a');
      el.appendChild(document.createTextNode(' '));
      a.href = link.href;
      a.textContent = link.text;
      el.appendChild(a);
    }
  }

  // call sends one API request. It resolves with the JSON envelope, or
  // rejects with an Error whose api field is the API's error object
  // ({code, message, field, value, spec_field}).
  function call(method, path, payload) {
    var init = { method: method, credentials: 'same-origin', headers: { 'Accept': 'application/json' } };
    if (method !== 'GET') {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(payload || {});
    }
    return fetch(prefix + 'api/' + path, init).then(function (res) {
      return res.text().then(function (text) {
        var json = null;
        try { json = text ? JSON.parse(text) : null; } catch (e) { json = null; }
        if (!res.ok) {
          var apiErr = (json && json.error) || { message: 'HTTP ' + res.status + ' ' + res.statusText };
          var err = new Error(apiErr.message);
          err.api = apiErr;
          throw err;
        }
        return json;
      });
    });
  }

  // refresh re-reads the page and swaps its <main>, so that an action's
  // effect shows without a reload and the flash stays.
  function refresh() {
    return fetch(location.href, { credentials: 'same-origin', headers: { 'Accept': 'text/html' } })
      .then(function (res) { return res.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, 'text/html');
        var fresh = doc.querySelector('main');
        var cur = document.querySelector('main');
        if (fresh && cur) cur.replaceWith(document.adoptNode(fresh));
      });
  }

  // follow refreshes until the execution a "run now" started has
  // finished on the page, or gives up after a number of tries.
  function follow(id, tries) {
    var el = document.querySelector('main [data-execution="' + id + '"]');
    if ((el && FINAL[el.getAttribute('data-status')]) || tries <= 0) return;
    setTimeout(function () {
      refresh().then(function () { follow(id, tries - 1); }, function () {});
    }, 800);
  }

  // Task actions: buttons with data-action and data-task, wherever the
  // page has them (rows swapped in by refresh included).
  document.addEventListener('click', function (ev) {
    var b = ev.target.closest ? ev.target.closest('button[data-action][data-task]') : null;
    if (!b) return;
    var code = b.getAttribute('data-task');
    var action = b.getAttribute('data-action');
    var path = 'tasks/' + encodeURIComponent(code) + '/';
    var method = 'POST';
    if (action === 'delete') {
      ev.preventDefault();
      if (!window.confirm('Delete the task ' + code + '? Its executions stay; nothing fires any more.')) return;
      b.disabled = true;
      call('DELETE', 'tasks/' + encodeURIComponent(code), {}).then(function () {
        try { sessionStorage.setItem(FLASH_KEY, 'Deleted ' + code + '.'); } catch (e) { /* no flash */ }
        location.href = prefix;
      }, function (err) {
        flash(code + ': ' + err.message, true);
        b.disabled = false;
      });
      return;
    }
    if (action === 'reset') {
      path += 'schedule';
      method = 'DELETE';
    } else if (action === 'reset-options') {
      path += 'options';
      method = 'DELETE';
    } else if (action === 'pause' || action === 'resume' || action === 'trigger') {
      path += action;
    } else {
      return;
    }
    ev.preventDefault();
    b.disabled = true;
    var payload = {};
    if (action === 'pause' || action === 'resume') {
      // The task page's note field, when it has one for this task.
      var inputs = document.querySelectorAll('input[data-note-for]');
      for (var i = 0; i < inputs.length; i++) {
        if (inputs[i].getAttribute('data-note-for') === code && inputs[i].value.trim()) payload.note = inputs[i].value.trim();
      }
    }
    call(method, path, payload).then(function (json) {
      if (action === 'trigger') {
        var id = json && json.data ? json.data.id : '?';
        flash('Started execution ' + id + ' of ' + code + '.', false, { href: prefix + 'executions/' + id, text: 'Open it' });
        return refresh().then(function () { follow(id, 40); });
      }
      flash(DONE[action] + ' ' + code + '.');
      return refresh();
    }).catch(function (err) {
      flash(code + ': ' + err.message, true);
      b.disabled = false;
    });
  });

  // The execution page's Retry: one more attempt of a failed or timed_out
  // execution (POST api/executions/{id}/retry), then the page follows it.
  document.addEventListener('click', function (ev) {
    var b = ev.target.closest ? ev.target.closest('button[data-retry]') : null;
    if (!b) return;
    ev.preventDefault();
    var id = b.getAttribute('data-retry');
    b.disabled = true;
    call('POST', 'executions/' + encodeURIComponent(id) + '/retry', {}).then(function () {
      flash('Retrying execution ' + id + '.');
      return refresh().then(function () { followStatus(40); });
    }).catch(function (err) {
      flash('Execution ' + id + ': ' + err.message, true);
      b.disabled = false;
    });
  });

  // followStatus refreshes the execution page until its status is final,
  // or gives up after a number of tries.
  function followStatus(tries) {
    var el = document.querySelector('main #execution-status');
    if ((el && FINAL[el.textContent]) || tries <= 0) return;
    setTimeout(function () {
      refresh().then(function () { followStatus(tries - 1); }, function () {});
    }, 800);
  }

  // A click anywhere on an execution row opens it, as its link does.
  document.addEventListener('click', function (ev) {
    if (!ev.target.closest) return;
    var tr = ev.target.closest('table.clickable tbody tr[data-execution]');
    if (!tr || ev.target.closest('a, button, input, select, summary')) return;
    if (window.getSelection && String(window.getSelection())) return; // selecting text
    var a = tr.querySelector('a.open');
    if (a) location.href = a.href;
  });

  // A flash left by the page before a navigation (the schedule form's save).
  try {
    var saved = sessionStorage.getItem(FLASH_KEY);
    if (saved) {
      sessionStorage.removeItem(FLASH_KEY);
      flash(saved);
    }
  } catch (e) { /* storage off: no flash */ }

  // The display zone: the select applies at once, and a button offers the
  // browser's own zone.
  var zoneForm = document.getElementById('zone-form');
  var zoneSelect = document.getElementById('zone-select');
  if (zoneForm && zoneSelect) {
    zoneSelect.addEventListener('change', function () { zoneForm.submit(); });
    var mine = '';
    try { mine = Intl.DateTimeFormat().resolvedOptions().timeZone || ''; } catch (e) { mine = ''; }
    if (mine && mine !== displayZone) {
      var use = document.createElement('button');
      use.type = 'button';
      use.className = 'small';
      use.id = 'zone-mine';
      use.textContent = 'Use my zone (' + mine + ')';
      use.addEventListener('click', function () {
        var known = Array.prototype.some.call(zoneSelect.options, function (o) { return o.value === mine; });
        if (!known) zoneSelect.add(new Option(mine, mine));
        zoneSelect.value = mine;
        zoneForm.submit();
      });
      zoneForm.appendChild(use);
    }
  }

  // parts splits an instant, read in zone, into the fields the server's
  // layouts use.
  function parts(iso, zone) {
    var p = {};
    new Intl.DateTimeFormat('en-US', {
      timeZone: zone, weekday: 'short', year: 'numeric', month: '2-digit', day: '2-digit',
      hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23'
    }).formatToParts(new Date(iso)).forEach(function (part) { p[part.type] = part.value; });
    return p;
  }

  // fireItem is one fire of the schedule form's expression, as the "fire"
  // template writes it: "Tue 2026-12-01 08:30:00 Europe/Paris", then
  // "· Tue 07:30:00 UTC" in the display zone when that is another.
  function fireItem(iso, zone) {
    var li = document.createElement('li');
    var t = document.createElement('time');
    var z = document.createElement('span');
    var p = parts(iso, zone);
    t.dateTime = iso;
    t.textContent = p.weekday + ' ' + p.year + '-' + p.month + '-' + p.day + ' ' + p.hour + ':' + p.minute + ':' + p.second;
    z.className = 'zone';
    z.textContent = zone;
    li.appendChild(t);
    li.appendChild(document.createTextNode(' '));
    li.appendChild(z);
    if (zone !== displayZone) {
      var d = parts(iso, displayZone);
      var also = document.createElement('span');
      also.className = 'also';
      also.textContent = '· ' + d.weekday + ' ' + d.hour + ':' + d.minute + ':' + d.second + ' ' + displayZone;
      li.appendChild(document.createTextNode(' '));
      li.appendChild(also);
    }
    return li;
  }

  // readable is a schedule error as the form shows it, as render.go's
  // specMessage does: without "xtimer: " and the expression it is about.
  function readable(e) {
    var m = (e.message || 'invalid schedule').replace(/^xtimer: /, '');
    var about = 'spec ' + JSON.stringify(e.value || '') + ': ';
    if (e.field === 'spec' && m.indexOf(about) === 0) m = m.slice(about.length);
    return m;
  }

  var scheduleForm = document.getElementById('schedule-form');
  if (scheduleForm) editSchedule(scheduleForm);
  var taskForm = document.getElementById('task-form');
  if (taskForm) editTask(taskForm);
  var calendarForm = document.getElementById('calendar-form');
  if (calendarForm) editCalendar(calendarForm);

  // cronHelper runs the schedule part of a form (the "cron-helper"
  // template): presets, a preview as the user types (the API's own
  // parser, so the form never disagrees with a save). ready() is true
  // while the preview on show is the answer for what the form holds and
  // that answer is valid; onChange is called whenever that may change.
  function cronHelper(form, onChange) {
    var spec = document.getElementById('spec');
    var dialect = document.getElementById('dialect');
    var zone = document.getElementById('zone');
    var errEl = document.getElementById('spec-error');
    var box = document.getElementById('preview');
    var desc = document.getElementById('preview-description');
    var list = document.getElementById('preview-next');
    // seq numbers the edits: a preview answer for an older one is dropped.
    var seq = 0;
    var timer = 0;
    // valid: the last answer was a preview, not an error; pending: the
    // form changed since, and the answer for it is awaited.
    var valid = !errEl.hasAttribute('data-field');
    var pending = false;

    function showError(e) {
      valid = false;
      pending = false;
      errEl.textContent = readable(e);
      errEl.setAttribute('data-field', e.spec_field || e.field || '');
      spec.setAttribute('aria-invalid', 'true');
      box.hidden = true;
      desc.textContent = '';
      list.textContent = '';
      onChange();
    }

    function showPreview(p) {
      valid = true;
      pending = false;
      errEl.textContent = '';
      errEl.removeAttribute('data-field');
      spec.removeAttribute('aria-invalid');
      box.hidden = false;
      desc.textContent = p.description;
      list.textContent = '';
      (p.next || []).forEach(function (iso) { list.appendChild(fireItem(iso, p.zone)); });
      onChange();
    }

    function run() {
      clearTimeout(timer);
      var mine = ++seq;
      if (!spec.value.trim()) {
        showError({ message: 'empty: want a cron expression such as "0 9 * * 1-5"', field: 'spec' });
        return;
      }
      pending = true;
      onChange();
      var q = new URLSearchParams({ spec: spec.value, dialect: dialect.value, tz: zone.value, n: '3' });
      call('GET', 'preview?' + q.toString()).then(function (json) {
        if (mine === seq) showPreview(json.data);
      }, function (err) {
        if (mine === seq) showError(err.api || { message: err.message });
      });
    }

    // While the user types, the old answer no longer applies: say so, and
    // ask again once typing pauses.
    spec.addEventListener('input', function () {
      seq++;
      pending = true;
      onChange();
      desc.textContent = '…';
      list.textContent = '';
      clearTimeout(timer);
      timer = setTimeout(run, 350);
    });
    zone.addEventListener('change', run);
    dialect.addEventListener('change', function () {
      var quartz = dialect.value === 'quartz';
      var converted = false;
      Array.prototype.forEach.call(form.querySelectorAll('button.preset'), function (b) {
        var from = b.getAttribute(quartz ? 'data-cron' : 'data-quartz');
        var to = b.getAttribute(quartz ? 'data-quartz' : 'data-cron');
        if (!converted && spec.value.trim() === from) {
          spec.value = to;
          converted = true;
        }
        b.setAttribute('data-spec', to);
      });
      run();
    });
    form.addEventListener('click', function (ev) {
      var b = ev.target.closest ? ev.target.closest('button.preset') : null;
      if (!b) return;
      spec.value = b.getAttribute('data-spec');
      run();
    });

    return {
      ready: function () { return valid && !pending; },
      value: function () { return { spec: spec.value, dialect: dialect.value, zone: zone.value }; },
      // owns says whether an API error is about the schedule; show puts
      // it under the expression.
      owns: function (e) { return e.field === 'spec' || e.field === 'dialect' || e.field === 'zone'; },
      show: showError
    };
  }

  // editSchedule runs the schedule form: the cron helper, and the save,
  // which is offered only while the helper is ready.
  function editSchedule(form) {
    var save = document.getElementById('save');
    var task = form.getAttribute('data-task');
    var cron = cronHelper(form, sync);
    function sync() {
      if (save) save.disabled = !cron.ready();
    }
    sync();
    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      if (!save || save.disabled) return;
      save.disabled = true;
      var edit = cron.value();
      call('PUT', 'tasks/' + encodeURIComponent(task) + '/schedule', edit).then(function () {
        try { sessionStorage.setItem(FLASH_KEY, 'Saved the schedule of ' + task + ': ' + edit.spec + ' (' + edit.dialect + ', ' + edit.zone + ').'); } catch (e) { /* no flash */ }
        location.href = form.getAttribute('data-task-url');
      }, function (err) {
        // A field the form holds is wrong: show it there. Anything else
        // (read-only, a lost connection) leaves the form as it was.
        if (err.api && err.api.field) cron.show(err.api);
        flash('Not saved: ' + err.message, true);
        sync();
      });
    });
  }

  // editTask runs the form of an HTTP callback task: the cron helper,
  // header rows to add and remove, and the save (POST api/tasks for a new
  // task, PUT api/tasks/{code} for a change), which goes to the task's
  // page, or shows the API's error in #flash and marks the input whose
  // data-field it names.
  function editTask(form) {
    var save = document.getElementById('save');
    var edit = form.getAttribute('data-edit') === 'true';
    var rows = document.getElementById('headers');
    var add = document.getElementById('add-header');
    var cron = cronHelper(form, sync);
    function sync() {
      if (save) save.disabled = !cron.ready();
    }
    sync();

    // The rows' data-field follow their order, as the API numbers them.
    function renumber() {
      Array.prototype.forEach.call(rows.querySelectorAll('.header-row'), function (row, i) {
        row.querySelector('[name=header_name]').setAttribute('data-field', 'target.headers[' + i + '].name');
        row.querySelector('[name=header_value]').setAttribute('data-field', 'target.headers[' + i + '].value');
      });
    }
    Array.prototype.forEach.call(form.querySelectorAll('button.remove-header'), function (b) { b.hidden = false; });
    add.hidden = false;
    add.addEventListener('click', function () {
      var last = rows.querySelector('.header-row:last-child');
      var row = last.cloneNode(true);
      row.querySelectorAll('input').forEach(function (i) {
        i.value = '';
        i.checked = false;
        i.removeAttribute('aria-invalid');
        if (i.name === 'header_value') i.type = 'text';
      });
      rows.appendChild(row);
      renumber();
      row.querySelector('[name=header_name]').focus();
    });
    form.addEventListener('click', function (ev) {
      var b = ev.target.closest ? ev.target.closest('button.remove-header') : null;
      if (!b) return;
      var row = b.closest('.header-row');
      if (rows.querySelectorAll('.header-row').length > 1) {
        row.remove();
      } else {
        row.querySelectorAll('input').forEach(function (i) { i.value = ''; i.checked = false; });
      }
      renumber();
    });
    // A secret header's value is typed unseen.
    form.addEventListener('change', function (ev) {
      if (ev.target.name !== 'header_secret') return;
      ev.target.closest('.header-row').querySelector('[name=header_value]').type = ev.target.checked ? 'password' : 'text';
    });

    function field(name) { return form.elements[name] ? form.elements[name].value : ''; }
    function number(name) {
      var v = field(name).trim();
      return v === '' ? 0 : Number(v);
    }

    // body is the TaskEdit the form holds. A text where a number belongs
    // is sent as it is, for the API to name.
    function body() {
      var b = cron.value();
      b.code = field('code').trim();
      b.name = field('name');
      b.description = field('description');
      b.owner = field('owner');
      b.target = { method: field('method'), url: field('url').trim(), headers: [], body: field('body'), success_codes: [] };
      rows.querySelectorAll('.header-row').forEach(function (row) {
        var name = row.querySelector('[name=header_name]').value.trim();
        var value = row.querySelector('[name=header_value]').value;
        if (!name && !value) return;
        b.target.headers.push({ name: name, value: value, secret: row.querySelector('[name=header_secret]').checked });
      });
      field('success_codes').split(',').forEach(function (c) {
        c = c.trim();
        if (c) b.target.success_codes.push(/^\d+$/.test(c) ? Number(c) : c);
      });
      if (field('secret')) b.target.secret = field('secret');
      b.timeout_ms = number('timeout_ms');
      b.max_attempts = number('max_attempts');
      b.backoff_base_ms = number('backoff_base_ms');
      b.backoff_max_ms = number('backoff_max_ms');
      b.max_concurrent = number('max_concurrent');
      b.overlap = field('overlap');
      b.jitter_ms = number('jitter_ms');
      b.misfire = field('misfire');
      b.misfire_window_ms = number('misfire_window_ms');
      b.end_at = field('end_at').trim() || null;
      b.max_runs = number('max_runs');
      b.pause_on_failure = number('pause_on_failure');
      b.calendar = field('calendar').trim();
      b.exclude = days(field('exclude'));
      if (!edit) b.paused = !!(form.elements.paused && form.elements.paused.checked);
      return b;
    }

    function unmark() {
      form.querySelectorAll('[aria-invalid="true"][data-field]').forEach(function (el) { el.removeAttribute('aria-invalid'); });
      var f = document.getElementById('flash');
      if (f) f.removeAttribute('data-field');
    }

    // mark points at the input an error names: a header's field names the
    // row among the non-empty ones the body was built from.
    function mark(e, sent) {
      var name = e.field.replace(/^(target\.success_codes|exclude)\[\d+\]$/, '$1');
      var m = /^target\.headers\[(\d+)\]\.(name|value)$/.exec(name);
      if (m && sent) {
        var i = -1;
        var n = Number(m[1]);
        rows.querySelectorAll('.header-row').forEach(function (row, j) {
          var empty = !row.querySelector('[name=header_name]').value.trim() && !row.querySelector('[name=header_value]').value;
          if (!empty && n-- === 0 && i < 0) i = j;
        });
        if (i >= 0) name = 'target.headers[' + i + '].' + m[2];
      } else if (/^target\.headers/.test(name)) {
        name = 'target.headers[0].name';
      }
      var el = form.querySelector('[data-field="' + name.replace(/["\\]/g, '\\$&') + '"]');
      if (!el) return;
      el.setAttribute('aria-invalid', 'true');
      el.focus();
    }

    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      if (!save || save.disabled) return;
      save.disabled = true;
      unmark();
      var b = body();
      var req = edit ? call('PUT', 'tasks/' + encodeURIComponent(form.getAttribute('data-task')), b) : call('POST', 'tasks', b);
      req.then(function (json) {
        var code = json.data && json.data.task ? json.data.task.code : b.code;
        try { sessionStorage.setItem(FLASH_KEY, (edit ? 'Saved ' : 'Created ') + code + '.'); } catch (e) { /* no flash */ }
        location.href = prefix + 'tasks/' + encodeURIComponent(code);
      }, function (err) {
        var e = err.api || { message: err.message };
        flash('Not saved: ' + e.message, true);
        var f = document.getElementById('flash');
        if (f && e.field) f.setAttribute('data-field', e.field);
        if (e.field && cron.owns(e)) cron.show(e);
        else if (e.field) mark(e, b);
        sync();
      });
    });
  }

  // days reads a list of dates typed one a line, or separated by commas
  // or spaces; the API names a wrong one.
  function days(text) {
    return text.split(/[\s,]+/).filter(function (d) { return d !== ''; });
  }

  // editCalendar runs the form of a calendar: the save replaces its days
  // (PUT api/calendars/{name}), then shows the calendar's page.
  function editCalendar(form) {
    var save = document.getElementById('save');
    if (save) save.disabled = false;
    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      if (!save || save.disabled) return;
      var name = form.getAttribute('data-calendar') || form.elements.name.value.trim();
      var list = days(form.elements.days.value);
      save.disabled = true;
      call('PUT', 'calendars/' + encodeURIComponent(name), { days: list }).then(function (json) {
        try { sessionStorage.setItem(FLASH_KEY, 'Saved calendar ' + name + ': ' + json.data.days.length + ' days.'); } catch (e) { /* no flash */ }
        location.href = prefix + 'calendars/' + encodeURIComponent(name);
      }, function (err) {
        flash('Not saved: ' + err.message, true);
        save.disabled = false;
      });
    });
  }

  // Backfill a range (the task page): a preview of the fires the range
  // holds and how many never ran, then, confirmed, the backfill itself.
  function backfillRange(form) {
    var from = form.elements.from.value, to = form.elements.to.value;
    if (!from || !to) return null;
    return { from: new Date(from).toISOString(), to: new Date(to).toISOString() };
  }
  function backfillPreview(form) {
    var out = document.getElementById('backfill-preview');
    var r = backfillRange(form);
    if (!r) {
      out.textContent = 'Set both ends of the range.';
      return Promise.reject(new Error(out.textContent));
    }
    var code = form.getAttribute('data-task');
    var q = '?from=' + encodeURIComponent(r.from) + '&to=' + encodeURIComponent(r.to);
    return call('GET', 'tasks/' + encodeURIComponent(code) + '/backfill' + q).then(function (json) {
      var p = json.data;
      out.textContent = 'The range holds ' + p.fires + ' fire' + (p.fires === 1 ? '' : 's') + '; ' + p.new + ' never ran.';
      out.setAttribute('data-new', p.new);
      return { range: r, preview: p, code: code };
    }, function (err) {
      out.textContent = err.message;
      throw err;
    });
  }
  document.addEventListener('click', function (ev) {
    var b = ev.target.closest ? ev.target.closest('button[data-backfill="preview"]') : null;
    if (!b) return;
    ev.preventDefault();
    backfillPreview(b.form).catch(function () {});
  });
  document.addEventListener('submit', function (ev) {
    var form = ev.target;
    if (form.id !== 'backfill-form') return;
    ev.preventDefault();
    backfillPreview(form).then(function (p) {
      if (p.preview.new === 0) return;
      if (!window.confirm('Run ' + p.preview.new + ' past fire' + (p.preview.new === 1 ? '' : 's') + ' of ' + p.code + ', one at a time, oldest first?')) return;
      return call('POST', 'tasks/' + encodeURIComponent(p.code) + '/backfill', p.range).then(function (json) {
        flash('Recorded ' + json.data.recorded + ' fires of ' + p.code + ' to backfill.');
        return refresh();
      });
    }).catch(function (err) {
      flash(form.getAttribute('data-task') + ': ' + err.message, true);
    });
  });

  // The task page's "Run now…" form: one manual run with the parameters
  // of its textarea (sent only when changed from the task's own, so that
  // an unchanged run reads the task's as a scheduled fire does) and a
  // note. The API takes the text as a JSON string (admin/trigger.go).
  document.addEventListener('submit', function (ev) {
    var form = ev.target;
    if (form.id !== 'trigger-form') return;
    ev.preventDefault();
    var code = form.getAttribute('data-task');
    var params = form.elements.params, note = form.elements.note;
    var payload = {};
    if (params && params.value !== params.defaultValue) payload.params = params.value;
    if (note && note.value.trim()) payload.note = note.value.trim();
    var b = form.querySelector('button[type="submit"]');
    if (b) b.disabled = true;
    call('POST', 'tasks/' + encodeURIComponent(code) + '/trigger', payload).then(function (json) {
      var id = json && json.data ? json.data.id : '?';
      flash('Started execution ' + id + ' of ' + code + '.', false, { href: prefix + 'executions/' + id, text: 'Open it' });
      return refresh().then(function () { follow(id, 40); });
    }).catch(function (err) {
      flash(code + ': ' + err.message, true);
      if (b) b.disabled = false;
    });
  });

  // The task page's "Override options…" form: PUT api/tasks/{code}/options
  // with the fields filled in; empty ones keep the code's value.
  document.addEventListener('submit', function (ev) {
    var form = ev.target;
    if (!form || form.id !== 'options-form') return;
    ev.preventDefault();
    var code = form.getAttribute('data-task');
    var payload = {};
    var bad = null;
    Array.prototype.forEach.call(form.querySelectorAll('[data-field]'), function (el) {
      var v = el.value.trim();
      if (!v) return;
      var name = el.getAttribute('data-field');
      if (name === 'misfire' || name === 'overlap') {
        payload[name] = v;
      } else if (name === 'params') {
        try { payload.params = JSON.parse(v); } catch (e) { bad = 'params: not valid JSON'; }
      } else {
        payload[name] = Number(v);
      }
    });
    if (bad) { flash(code + ': ' + bad, true); return; }
    call('PUT', 'tasks/' + encodeURIComponent(code) + '/options', payload).then(function () {
      flash('Overrode the options of ' + code + '.');
      return refresh();
    }).catch(function (err) {
      flash(code + ': ' + err.message, true);
    });
  });
})();
