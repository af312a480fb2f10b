// The scenario driver of tests/test_live_dsh.py: a Cordis plugin mounted in place of dsh's headless runner
// (tests/live-dsh/overlay.py writes the patch). It creates or resumes one session and plays the scenario's
// steps through dsh's public services, then asks the launcher to exit. Written for this project; modelled on
// how @deepseek-ai/dsh-headless drives one agent.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import z from "@deepseek-ai/schemastery";
import { installModelSelection } from "@deepseek-ai/dsh-agent";
import { createUserMessage } from "@deepseek-ai/dsh-llm";
import { SessionId } from "@deepseek-ai/dsh-session";

export const name = "live-driver";
export const inject = ["agentDefaultModel", "agents", "sessions", "commands"];
export const Config = z.object({
  sessionId: z.string().required(),
  resume: z.boolean().default(false),
  steps: z.array(z.any()).default([]),
});

async function play(ctx, config) {
  await ctx.get("loader")?.await();
  const agents = ctx.get("agents");
  const sessions = ctx.get("sessions");
  const commands = ctx.get("commands");
  const selection = { current: ctx.get("agentDefaultModel").currentSelection(), assembled: undefined };
  const options = {
    agentOptions: { provider: selection.current.provider, model: selection.current.model },
    setup: (agentCtx) => { installModelSelection(agentCtx, selection); },
  };
  const { agent } = config.resume
    ? await agents.resume({ resumeSessionId: config.sessionId, ...options })
    : await agents.create({ sessionId: SessionId(config.sessionId), meta: { cwd: process.cwd() }, ...options });
  await agent.whenIdle();
  const outcomes = [];
  for (const step of config.steps) {
    if (step.say !== undefined) {
      agent.followup(createUserMessage({ content: [{ type: "text", text: step.say }], source: { kind: "user" } }));
    } else if (step.command !== undefined) {
      const settled = await commands.execute(agent, step.command, [], new AbortController().signal);
      outcomes.push({ command: step.command, kind: settled?.result.kind ?? "unknown", text: settled?.result.text });
    } else if (step.select !== undefined) {
      selection.current = { ...selection.current, ...step.select };
    } else if (step.write !== undefined) {
      writeFileSync(join(process.cwd(), step.write.path), step.write.text);
    } else {
      throw new Error(`live-driver: unknown step ${JSON.stringify(step)}`);
    }
    await agent.whenIdle();
  }
  await sessions.flush(agent.session);
  process.stdout.write(JSON.stringify({ session: agent.session.id, outcomes }) + "\n");
}

export function apply(ctx, config) {
  const exit = ctx.get("appExit");
  play(ctx, config).then(() => exit(0), (error) => {
    process.stderr.write(`live-driver: ${error instanceof Error ? error.stack : String(error)}\n`);
    exit(1);
  });
}
