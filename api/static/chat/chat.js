// The hosted chat page of a Chat Trigger. It speaks the same protocol as n8n's @n8n/chat widget:
// POST {action, sessionId, chatInput} (multipart when files are attached) to this page's URL,
// and reads either NDJSON chunks (streaming) or a JSON object with `output`. In responseNodes
// mode the POST answers {executionStarted, executionId}: the page then opens the chat WebSocket
// (/chat?sessionId&executionId&isPublic=true) and shows each Chat-node message; while a node
// waits, the next message is its reply, sent over that socket. An approval comes as
// {"type":"with-buttons", text, buttons, blockUserInput}: its buttons GET their link, as the
// widget's do. Tool-step lines (tool-call-start / tool-call-end, an option of the AI Agent) show
// as one compact line per tool call above the answer.
// With showWelcomeScreen, a start button comes first, as in the widget (not when the session is
// restored). Bubbles carry the widget's classes too (chat-message, chat-message-from-bot/-user),
// so a Chat Trigger's customCss applies to them.
// Every string from the workflow or the conversation is put into the page as text, never as HTML.
(() => {
  'use strict';

  const config = JSON.parse(document.getElementById('chat-config').textContent);
  const $ = (id) => document.getElementById(id);
  const list = $('chat-messages');
  const form = $('chat-form');
  const input = $('chat-input');
  const send = $('chat-send');
  const files = $('chat-files');
  const chosen = $('chat-chosen');
  const url = window.location.pathname;
  const storageKey = `mini-n8n-chat/${config.workflowId}/sessionId`;
  let sessionId = storedSession() || remember(newSessionId());
  let chat = null; // the open chat WebSocket of a responseNodes conversation: {ws, waiting}
  let inputBlocked = false;

  // --- session --------------------------------------------------------------------------------
  function newSessionId() {
    // A UUID v4 from getRandomValues: crypto.randomUUID needs a secure context (https).
    const b = crypto.getRandomValues(new Uint8Array(16));
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }

  function storedSession() {
    try {
      return localStorage.getItem(storageKey);
    } catch {
      return null; // storage disabled: the session lasts as long as the page
    }
  }

  function remember(id) {
    try {
      localStorage.setItem(storageKey, id);
    } catch {
      // storage disabled
    }
    return id;
  }

  // --- bubbles --------------------------------------------------------------------------------
  function bubble(role, text, state = 'done') {
    const li = document.createElement('li');
    const from = role === 'user' ? 'user' : 'bot';
    li.className = `message ${role} chat-message chat-message-from-${from}`;
    li.dataset.state = state;
    const body = document.createElement('div');
    body.className = 'text';
    body.textContent = text;
    li.append(body);
    list.append(li);
    li.scrollIntoView({ block: 'end' });
    return li;
  }

  function showError(li, message) {
    const line = document.createElement('div');
    line.className = 'error';
    line.textContent = `Error: ${message || 'Unknown error'}`;
    li.append(line);
    li.dataset.state = 'error';
  }

  function startOver() {
    list.replaceChildren();
    for (const message of config.initialMessages) bubble('bot', message);
  }

  function welcome(shown) {
    $('chat-welcome').hidden = !shown;
    for (const part of [list, form, $('chat-new')]) part.hidden = shown;
  }

  // --- talking to the trigger -----------------------------------------------------------------
  function post(fields, attached = []) {
    const body = { ...fields, sessionId };
    if (!attached.length) {
      return fetch(url, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/x-ndjson, application/json' },
        body: JSON.stringify(body),
      });
    }
    const parts = new FormData(); // the widget's multipart shape: fields, then `files` parts
    for (const [key, value] of Object.entries(body)) parts.append(key, value);
    for (const file of attached) parts.append('files', file);
    return fetch(url, { method: 'POST', body: parts });
  }

  async function errorText(response) {
    const text = await response.text();
    try {
      const body = JSON.parse(text);
      return [body.message, body.error].filter(Boolean).join(': ') || text;
    } catch {
      return text || `HTTP ${response.status}`;
    }
  }

  function outputText(body) {
    if (typeof body === 'string') return body;
    if (body && typeof body === 'object') {
      let found = body.output ?? body.text ?? body.message;
      if (found && typeof found === 'object' && found.type === 'text') found = found.text;
      if (typeof found === 'string') return found;
    }
    return JSON.stringify(body, null, 2);
  }

  async function readLines(stream, onLine) {
    const reader = stream.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      buffer += decoder.decode(value, { stream: !done });
      const lines = buffer.split('\n');
      buffer = done ? '' : lines.pop();
      for (const line of lines) if (line.trim()) onLine(line);
      if (done) return;
    }
  }

  function parseChunk(line) {
    try {
      const chunk = JSON.parse(line);
      if (chunk && typeof chunk === 'object') return chunk;
    } catch {
      // not JSON: shown as text, like the widget does
    }
    return { type: 'item', content: line };
  }

  async function showAnswer(response, li) {
    const text = li.querySelector('.text');
    if (!response.ok) return showError(li, await errorText(response));
    if (!(response.headers.get('Content-Type') || '').includes('ndjson')) {
      const raw = await response.text(); // JSON from lastNode; anything from a Respond node
      let body = raw;
      try {
        body = JSON.parse(raw);
      } catch {
        // plain text: shown as it is
      }
      if (body && typeof body === 'object' && body.executionStarted && body.executionId) {
        return converse(body.executionId, body.resumeToken, li);
      }
      text.textContent = outputText(body);
      li.dataset.state = 'done';
      return;
    }
    let shown = false;
    await readLines(response.body, (line) => {
      const chunk = parseChunk(line);
      if (chunk.type === 'item' && chunk.content != null) {
        const content = chunk.content;
        text.append(typeof content === 'string' ? content : JSON.stringify(content));
        li.dataset.state = 'streaming';
        shown = true;
      } else if (chunk.type === 'error') {
        showError(li, chunk.content);
        shown = true;
      } else if (chunk.type === 'tool-call-start' || chunk.type === 'tool-call-end') {
        showToolStep(li, chunk.type, chunk.metadata || {});
      }
      // begin, end, keepalive and anything else: nothing to show
    });
    if (!shown) showError(li, 'No response received');
    if (li.dataset.state !== 'error') li.dataset.state = 'done';
  }

  // One compact line per tool call, above the answer: "Calculator · 19 * 23 → 437" (an ellipsis
  // while it runs). The lines are the AI Agent's streamToolCalls option; ids pair start and end.
  function showToolStep(li, kind, meta) {
    let steps = li.querySelector('.tool-steps');
    if (!steps) {
      steps = document.createElement('div');
      steps.className = 'tool-steps';
      li.prepend(steps);
    }
    const id = String(meta.toolCallId ?? '');
    let line = Array.from(steps.children).find((el) => el.dataset.toolCallId === id && !el.dataset.done);
    if (!line) {
      line = document.createElement('div');
      line.className = 'tool-step';
      line.dataset.toolCallId = id;
      steps.append(line);
    }
    const name = String(meta.toolNode || meta.toolName || 'tool');
    if (kind === 'tool-call-start') line.dataset.input = toolInputText(meta.toolInput);
    const head = `${name} · ${line.dataset.input ?? ''}`;
    if (kind === 'tool-call-start') {
      line.textContent = `${head} …`;
      return;
    }
    line.dataset.done = 'true';
    if (meta.toolError != null) {
      line.dataset.error = 'true';
      line.textContent = `${head} → error: ${meta.toolError}`;
    } else {
      line.textContent = `${head} → ${meta.toolOutput ?? ''}`;
    }
  }

  // A tool's input as a person reads it: the text of {"input": ...}, else the JSON.
  function toolInputText(raw) {
    try {
      const args = typeof raw === 'string' ? JSON.parse(raw) : raw;
      if (args && typeof args === 'object' && Object.keys(args).length === 1 && 'input' in args) {
        return typeof args.input === 'string' ? args.input : JSON.stringify(args.input);
      }
      return JSON.stringify(args);
    } catch {
      return String(raw ?? '');
    }
  }

  // --- Chat nodes (responseNodes): one execution, several messages ----------------------------
  // `chat` is the open socket: `waiting` (the last message waits for a reply), `pending` (the
  // bubble the next message goes into), `settle` (ends the current send: the input is free).
  function converse(executionId, resumeToken, pending) {
    const scheme = window.location.protocol === 'https:' ? 'wss' : 'ws';
    // The token from the POST's answer, as @n8n/chat 1.37 sends it: the socket requires it.
    const params = new URLSearchParams({ sessionId, executionId, isPublic: 'true' });
    params.set('token', resumeToken || '');
    const ws = new WebSocket(`${scheme}://${window.location.host}/chat?${params}`);
    const open = { ws, waiting: false, pending, settle: null };
    chat = open;
    ws.onmessage = (event) => onFrame(open, String(event.data));
    ws.onclose = () => {
      if (chat === open) chat = null;
      blockInput(false);
      if (open.pending && open.pending.dataset.state === 'pending') open.pending.remove();
      open.pending = null;
      settle(open);
    };
    return new Promise((resolve) => {
      open.settle = resolve;
    });
  }

  function settle(open) {
    const done = open.settle;
    open.settle = null;
    if (done) done();
  }

  function onFrame(open, frame) {
    if (frame === 'n8n|heartbeat') return open.ws.send('n8n|heartbeat-ack');
    if (frame === 'n8n|continue') {
      open.waiting = false; // that node did not wait: more is coming
      open.pending = open.pending || bubble('bot', '', 'pending');
      return;
    }
    const target = open.pending || bubble('bot', '', 'pending');
    open.pending = null;
    let error = null;
    try {
      const body = JSON.parse(frame);
      if (body && typeof body === 'object' && body.type === 'error') error = body.message;
    } catch {
      // plain text: the message itself
    }
    if (error !== null) {
      showError(target, error);
    } else {
      const buttons = withButtons(frame);
      target.querySelector('.text').textContent = buttons ? buttons.text : frame;
      if (buttons) showButtons(target, buttons);
      target.dataset.state = 'done';
      open.waiting = true; // until n8n|continue says this node does not wait
      blockInput(Boolean(buttons && buttons.blockUserInput));
    }
    target.scrollIntoView({ block: 'end' });
    settle(open);
  }

  function withButtons(frame) {
    try {
      const body = JSON.parse(frame);
      if (body && body.type === 'with-buttons' && Array.isArray(body.buttons)) return body;
    } catch {
      // plain text
    }
    return null;
  }

  // Like the widget: only links on this page's origin are shown; a click GETs the link and,
  // once it answered, the clicked button stays (disabled) and the others go.
  function showButtons(li, message) {
    const row = document.createElement('div');
    row.className = 'buttons';
    for (const button of message.buttons) {
      let link;
      try {
        link = new URL(String(button.link), window.location.href);
      } catch {
        continue;
      }
      if (link.origin !== window.location.origin) continue;
      const b = document.createElement('button');
      b.type = 'button';
      b.className = button.type === 'secondary' ? 'secondary' : 'primary';
      b.textContent = String(button.text ?? '');
      b.addEventListener('click', async () => {
        if (row.dataset.clicked) return;
        row.dataset.clicked = 'pending';
        try {
          const response = await fetch(link.href);
          if (!response.ok) throw new Error(await errorText(response));
          row.dataset.clicked = 'true';
          b.disabled = true;
          for (const other of row.querySelectorAll('button')) if (other !== b) other.remove();
          blockInput(false);
        } catch (err) {
          delete row.dataset.clicked;
          showError(li, err.message);
        }
      });
      row.append(b);
    }
    li.append(row);
  }

  // An approval with blockUserInput takes no typed answer until a button is clicked.
  function blockInput(blocked) {
    inputBlocked = blocked;
    input.disabled = blocked;
    send.disabled = blocked || list.getAttribute('aria-busy') === 'true';
  }

  function replyOverSocket(open, message) {
    open.waiting = false;
    open.pending = bubble('bot', '', 'pending');
    const answered = new Promise((resolve) => {
      open.settle = resolve;
    });
    open.ws.send(JSON.stringify({ sessionId, action: 'sendMessage', chatInput: message, files: [] }));
    return answered;
  }

  async function sendMessage(message, attached) {
    const mine = bubble('user', message);
    if (attached.length) {
      const names = document.createElement('div');
      names.className = 'files';
      names.textContent = attached.map((f) => f.name).join(', ');
      mine.append(names);
    }
    if (chat && chat.waiting && chat.ws.readyState === WebSocket.OPEN && !attached.length) {
      return replyOverSocket(chat, message);
    }
    const li = bubble('bot', '', 'pending');
    try {
      await showAnswer(await post({ action: 'sendMessage', chatInput: message }, attached), li);
    } catch (err) {
      showError(li, `Failed to receive response (${err.message})`);
    }
    li.scrollIntoView({ block: 'end' });
  }

  async function restore() {
    if (!config.loadPreviousSession) return;
    try {
      const response = await post({ action: 'loadPreviousSession' });
      if (!response.ok) return showError(bubble('bot', ''), await errorText(response));
      const { data } = await response.json();
      for (const message of data || []) {
        const kind = (message.id || []).at(-1);
        const content = message.kwargs && message.kwargs.content;
        if (typeof content !== 'string' || !content) continue; // tool calls and the like
        if (kind === 'HumanMessage') bubble('user', content);
        else if (kind === 'AIMessage') bubble('bot', content);
      }
    } catch (err) {
      showError(bubble('bot', ''), `Could not load the conversation (${err.message})`);
    }
  }

  // --- wiring ---------------------------------------------------------------------------------
  async function busy(work) {
    send.disabled = true;
    list.setAttribute('aria-busy', 'true');
    try {
      await work();
    } finally {
      list.setAttribute('aria-busy', 'false');
      send.disabled = inputBlocked;
    }
  }

  function showChosen() {
    const names = Array.from(files.files, (f) => f.name);
    chosen.textContent = names.join(', ');
    chosen.hidden = !names.length;
  }

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const message = input.value.trim();
    const attached = Array.from(files.files);
    if ((!message && !attached.length) || send.disabled || inputBlocked) return;
    input.value = '';
    files.value = '';
    showChosen();
    busy(() => sendMessage(message, attached));
  });

  input.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });

  $('chat-new').addEventListener('click', () => {
    if (send.disabled) return;
    if (chat) chat.ws.close();
    sessionId = remember(newSessionId());
    startOver();
    input.focus();
  });

  $('chat-start').addEventListener('click', () => {
    sessionId = remember(newSessionId()); // as the widget's start: a new session
    welcome(false);
    startOver();
    input.focus();
  });

  files.addEventListener('change', showChosen);

  document.title = config.title || 'Chat';
  $('chat-title').textContent = config.title;
  $('chat-subtitle').textContent = config.subtitle;
  $('chat-new').textContent = config.newConversation;
  $('chat-start').textContent = config.newConversation;
  input.placeholder = config.inputPlaceholder;
  if (config.allowFileUploads) {
    $('chat-attach').hidden = false;
    if (config.allowedFilesMimeTypes && config.allowedFilesMimeTypes !== '*') {
      files.accept = config.allowedFilesMimeTypes;
    }
  }
  // The widget starts at its welcome screen unless it restored the previous session.
  const welcoming = config.showWelcomeScreen && !config.loadPreviousSession;
  if (welcoming) welcome(true);
  else startOver();
  busy(restore).then(() => {
    document.body.dataset.ready = 'true';
    (welcoming ? $('chat-start') : input).focus();
  });
})();
