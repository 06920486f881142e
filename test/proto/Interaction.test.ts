/**
 * The shared user-choice decision rule (`Interaction.validateUserChoiceDecision`, reference part 2 §3.5)
 * and the interaction frames' own shape rules (I3, I4).
 */
import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import { Ids, Interaction, Messages } from "../../src/proto/index.js"
import { getErr, getOk } from "./support/frames.js"

const decision = (
  fields: Omit<Interaction.UserChoiceDecisionPayload, "delivery_id">
): Interaction.UserChoiceDecisionPayload => ({ delivery_id: Ids.unsafeMake.deliveryId("d-1"), ...fields })
const emitted = ["branch", "notes", "reviewers"]
const answer = (question_id: string, ...answers: Array<string>) => ({ question_id, answers })

describe("Interaction.validateUserChoiceDecision", () => {
  it("accepts answers to emitted questions in any order, leaving omitted questions unanswered", () => {
    const forward = decision({ question_answers: [answer("branch", "main"), answer("reviewers", "ana", "li")] })
    const backward = decision({ question_answers: [answer("reviewers", "li", "ana"), answer("branch", "main")] })
    assert.deepStrictEqual(Interaction.validateUserChoiceDecision(forward, emitted), Option.none())
    assert.deepStrictEqual(Interaction.validateUserChoiceDecision(backward, emitted), Option.none())
    const byQuestion = Interaction.answersByQuestion(backward)
    assert.deepStrictEqual(byQuestion.get("branch"), ["main"])
    assert.isFalse(byQuestion.has("notes"))
  })

  it("accepts an empty answers array as an explicit non-answer", () => {
    const explicitNone = decision({ question_answers: [answer("notes")] })
    assert.deepStrictEqual(Interaction.validateUserChoiceDecision(explicitNone, emitted), Option.none())
    assert.deepStrictEqual(Interaction.answersByQuestion(explicitNone).get("notes"), [])
  })

  it("accepts a decision with no answers at all, and a cancellation without answers", () => {
    assert.deepStrictEqual(Interaction.validateUserChoiceDecision(decision({}), emitted), Option.none())
    assert.deepStrictEqual(Interaction.validateUserChoiceDecision(decision({ question_answers: [] }), emitted), Option.none())
    const cancelled = decision({ cancelled: true, reason: "timeout" })
    assert.deepStrictEqual(Interaction.validateUserChoiceDecision(cancelled, emitted), Option.none())
    assert.deepStrictEqual(Interaction.validateUserChoiceDecision(decision({ cancelled: true, question_answers: [] }), emitted), Option.none())
  })

  it("refuses a cancellation that carries answers", () => {
    const both = decision({ cancelled: true, question_answers: [answer("branch", "main")] })
    assert.deepStrictEqual(Interaction.validateUserChoiceDecision(both, emitted), Option.some("cancelled_with_answers"))
  })

  it("refuses an empty or whitespace-only question id", () => {
    for (const id of ["", "   ", "\t\n"]) {
      const blank = decision({ question_answers: [answer("branch", "main"), answer(id, "x")] })
      assert.deepStrictEqual(Interaction.validateUserChoiceDecision(blank, emitted), Option.some("blank_question_id"))
    }
  })

  it("refuses a question id that repeats, even with the same answers", () => {
    const repeated = decision({ question_answers: [answer("branch", "main"), answer("notes"), answer("branch", "main")] })
    assert.deepStrictEqual(Interaction.validateUserChoiceDecision(repeated, emitted), Option.some("duplicate_question_id"))
    assert.deepStrictEqual(Interaction.validateUserChoiceDecision(repeated), Option.some("duplicate_question_id"))
  })

  it("refuses a question id that was not emitted, including a header or a position used as an id", () => {
    for (const id of ["Branch", "0", "branch ", "unknown"]) {
      const foreign = decision({ question_answers: [answer(id, "main")] })
      assert.deepStrictEqual(Interaction.validateUserChoiceDecision(foreign, emitted), Option.some("unknown_question_id"))
    }
  })

  it("checks only the shape when no pending ask is given", () => {
    const foreign = decision({ question_answers: [answer("anything", "x")] })
    assert.deepStrictEqual(Interaction.validateUserChoiceDecision(foreign), Option.none())
  })
})

describe("interaction frames", () => {
  it("refuse a user-choice decision with the legacy top-level answers or an answer without its array", () => {
    const frames = [
      { delivery_id: "d-1", answers: ["main"] },
      { delivery_id: "d-1", question_answers: [{ question_id: "branch", answer: "main", answers: [] }] },
      { delivery_id: "d-1", question_answers: [{ question_id: "branch" }] },
      { delivery_id: "d-1", question_answers: [{ question_id: "branch", answers: null }] },
      { question_answers: [] }
    ]
    for (const payload of frames) {
      const text = JSON.stringify({ type: "prompt_for_user_choice_decision", id: "ask_1", payload })
      assert.strictEqual(getErr(Messages.decodeCoreToRuntime(text)).code, "invalid_payload")
    }
  })

  it("refuse a prompt_for_user_choice whose question ids repeat or are empty (I3)", () => {
    const question = (id: string) => ({ id, question: "Which?", options: [] })
    for (const questions of [[question("q1"), question("q1")], [question("")]]) {
      const text = JSON.stringify({ type: "prompt_for_user_choice", id: "run-1", payload: { ask_id: "ask_1", questions } })
      assert.strictEqual(getErr(Messages.decodeRuntimeToCore(text)).code, "invalid_payload")
    }
    const ok = JSON.stringify({
      type: "prompt_for_user_choice",
      id: "run-1",
      payload: { ask_id: "ask_1", questions: [question("q1"), question("q2")] }
    })
    getOk(Messages.decodeRuntimeToCore(ok))
  })

  it("refuse an applied acknowledgement that carries an error code (I4) and accept a refusal with one", () => {
    const ack = (payload: object) => JSON.stringify({ type: "interaction_decision_ack", id: "perm_1", payload })
    assert.strictEqual(
      getErr(Messages.decodeRuntimeToCore(ack({ delivery_id: "d-1", applied: true, error_code: "not_pending" }))).code,
      "invalid_payload"
    )
    getOk(Messages.decodeRuntimeToCore(ack({ delivery_id: "d-1", applied: false, error_code: "invalid_decision" })))
    assert.strictEqual(
      getErr(Messages.decodeRuntimeToCore(ack({ delivery_id: "d-1", applied: false, error_code: "teapot" }))).code,
      "invalid_payload"
    )
  })
})
