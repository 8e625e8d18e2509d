// The conversation list's groups, as n8n's Chat Hub sorts a conversation by the day of its last
// message: Today, Yesterday, This week (the seven days before yesterday), Older.

export const GROUPS = ["Today", "Yesterday", "This week", "Older"];

function startOfDay(date) {
  return new Date(date.getFullYear(), date.getMonth(), date.getDate());
}

export function groupOf(at, now = new Date()) {
  const today = startOfDay(now);
  const yesterday = new Date(today);
  yesterday.setDate(yesterday.getDate() - 1); // calendar days: right across a DST change
  const weekAgo = new Date(today);
  weekAgo.setDate(weekAgo.getDate() - 7);
  const day = startOfDay(new Date(at));
  if (day.getTime() === today.getTime()) return "Today";
  if (day.getTime() === yesterday.getTime()) return "Yesterday";
  return day >= weekAgo ? "This week" : "Older";
}

// [{group, sessions}] in GROUPS' order, each newest first; empty groups left out.
export function grouped(sessions, now = new Date()) {
  const byGroup = new Map(GROUPS.map((g) => [g, []]));
  for (const session of sessions) byGroup.get(groupOf(lastAt(session), now)).push(session);
  return GROUPS.map((group) => ({
    group,
    sessions: byGroup.get(group).sort((a, b) => lastAt(b) - lastAt(a) || (a.id < b.id ? -1 : 1)),
  })).filter((g) => g.sessions.length);
}

export function lastAt(session) {
  return Date.parse(session.lastMessageAt ?? session.updatedAt ?? "") || 0;
}
