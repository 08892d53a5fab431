// Fila dashboard: reloads the numbers of the overview and queue pages in
// place. Everything works without it; it only saves the reload.
(function () {
  'use strict';

  // Forget the one-time "done" message of an action, so a reload does not
  // show it again.
  var url = new URL(window.location.href);
  if (url.searchParams.has('done')) {
    ['done', 'n', 'queue'].forEach(function (k) { url.searchParams.delete(k); });
    window.history.replaceState(null, '', url.toString());
  }

  var every = Number(document.body.getAttribute('data-refresh-ms') || 0);
  var live = document.getElementById('live');
  if (!every || !live) {
    return;
  }
  var status = document.getElementById('refresh-status');
  var toggle = document.getElementById('refresh-toggle');
  var paused = false;
  var busy = false;

  function say(text, failed) {
    if (status) {
      status.textContent = text;
      status.classList.toggle('error', !!failed);
    }
  }

  function refresh() {
    if (paused || busy || document.hidden) {
      return;
    }
    busy = true;
    fetch(window.location.href, {
      credentials: 'same-origin',
      cache: 'no-store',
      headers: { 'X-Fila-Refresh': '1' }
    }).then(function (res) {
      if (!res.ok) {
        throw new Error('HTTP ' + res.status);
      }
      return res.text();
    }).then(function (html) {
      if (paused) {
        return; // paused while the fetch was under way: keep the page as it is
      }
      // The server escaped every value; parsed scripts never run anyway.
      var doc = new DOMParser().parseFromString(html, 'text/html');
      var fresh = doc.getElementById('live');
      var cur = document.getElementById('live');
      if (!fresh || !cur) {
        throw new Error('unexpected page');
      }
      cur.replaceWith(document.importNode(fresh, true));
      document.body.setAttribute('data-refreshed', String(Date.now()));
      say('updated ' + new Date().toLocaleTimeString(), false);
    }).catch(function (err) {
      if (!paused) {
        say('refresh failed: ' + err.message, true);
      }
    }).finally(function () {
      busy = false;
    });
  }

  if (toggle) {
    toggle.hidden = false;
    toggle.addEventListener('click', function () {
      paused = !paused;
      toggle.textContent = paused ? 'Resume refresh' : 'Pause refresh';
      say(paused ? 'refresh paused' : '', false);
      if (!paused) {
        refresh();
      }
    });
  }
  document.addEventListener('visibilitychange', refresh);
  window.setInterval(refresh, every);
  say('refreshing every ' + Math.round(every / 1000) + 's', false);
})();
