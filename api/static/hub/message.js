// One message as the page keeps it: n8n's ChatHubMessageDto, its content chunks read into a text
// (and an approval's buttons), times as milliseconds. Push events build the same shape.

const BUTTONS_FRAME = '{"type":"with-buttons"';

export function fromDto(dto) {
  const approval = dto.content.find((c) => c.type === "with-buttons");
  return {
    id: dto.id,
    type: dto.type,
    name: dto.name,
    text: dto.content.filter((c) => c.type === "text").map((c) => c.content).join(""),
    approval: approval
      ? { text: approval.content, buttons: approval.buttons, blockUserInput: approval.blockUserInput }
      : null,
    status: dto.status,
    createdAt: Date.parse(dto.createdAt) || 0,
    previousMessageId: dto.previousMessageId,
    retryOfMessageId: dto.retryOfMessageId,
    revisionOfMessageId: dto.revisionOfMessageId,
    executionId: dto.executionId,
    attachments: dto.attachments || [],
  };
}

// A Chat node's approval: {text, buttons: [{text, link, type}], blockUserInput}, or null. While
// it streams it is the frame's JSON text, read once whole.
export function approvalOf(message) {
  if (message.approval) return message.approval;
  if (!message.text.startsWith(BUTTONS_FRAME)) return null;
  try {
    const body = JSON.parse(message.text);
    if (!Array.isArray(body.buttons)) return null;
    return { text: String(body.text ?? ""), buttons: body.buttons, blockUserInput: Boolean(body.blockUserInput) };
  } catch {
    return null; // not whole yet
  }
}

// The empty AI message of a tool call (n8n: a tool-using reply is two messages).
export function isToolStep(message) {
  return message.type === "ai" && !message.text && !message.approval && message.status === "success";
}

export function isRunning(message) {
  return message.type === "ai" && message.status === "running";
}
