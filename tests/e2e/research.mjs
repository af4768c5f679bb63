// The mock model's script for `coordinator` and its `researcher` children, shared by
// the sub-agents' end-to-end files: it answers by role (system prompt) and by what the
// conversation holds, since sibling children call it concurrently.

/** The scripted behaviour of both agents: a coordinator researches each topic of its
 *  comma-separated input; a researcher fails on `fail…`, deletes the file of
 *  `delete …` (an approval), else finishes with a summary. */
export function research(body) {
  const system = body?.messages?.[0]?.content ?? '';
  const last = body?.messages?.at(-1) ?? {};
  if (system.startsWith('You are a researcher')) {
    if (last.role === 'tool') {
      return { calls: [{ name: '__finish__', args: { summary: `done: ${last.content}` } }] };
    }
    const topic = JSON.parse(last.content).topic;
    if (topic.startsWith('fail')) return { status: 400, body: { error: { message: 'scripted failure' } } };
    if (topic.startsWith('delete ')) return { calls: [{ name: 'delete_file', args: { path: topic.slice(7) } }] };
    return { calls: [{ name: '__finish__', args: { summary: `summary of ${topic}` } }] };
  }
  if (last.role === 'tool') return { text: 'All research is in.' };
  const topics = String(last.content).split(',').map((t) => t.trim());
  return { calls: topics.map((topic) => ({ name: 'research', args: { topic } })) };
}
