//! What a request says its output must match (docs/runner.md "Structured output"): OpenAI's
//! `response_format` (`text`, `json_object`, `json_schema`) and the `grammar` extension (a Lark
//! grammar or a regular expression, as mistral.rs takes it), read into the [`Grammar`] the
//! sampler enforces; and, in the worker, the constraint each request gets.

use serde_json::Value;

use super::api::ApiError;
use crate::chat::{ForceCall, Forced};
use crate::constrain::{ConstraintError, Grammar, Grammars};

/// The grammar a request asks for, if any; refuses a malformed or contradictory one.
pub fn grammar(
    response_format: Option<&Value>,
    grammar: Option<&Value>,
) -> Result<Option<Grammar>, ApiError> {
    let format = response_format
        .map(from_response_format)
        .transpose()?
        .flatten();
    let extension = grammar
        .filter(|g| !g.is_null())
        .map(from_extension)
        .transpose()?;
    match (format, extension) {
        (Some(_), Some(_)) => Err(ApiError::invalid(
            "give response_format or grammar, not both",
            Some("grammar"),
        )),
        (f, e) => Ok(f.or(e)),
    }
}

fn from_response_format(f: &Value) -> Result<Option<Grammar>, ApiError> {
    let bad = |why: &str| ApiError::invalid(why.to_string(), Some("response_format"));
    match f.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(Grammar::JsonObject)),
        Some("json_schema") => {
            let spec = f.get("json_schema").ok_or_else(|| {
                bad("response_format json_schema needs a `json_schema` object: {\"name\": …, \"schema\": {…}}")
            })?;
            match spec.get("schema") {
                Some(s) if s.is_object() => Ok(Some(Grammar::JsonSchema(s.clone()))),
                Some(_) => Err(bad(
                    "response_format.json_schema.schema must be a JSON object",
                )),
                // OpenAI's schema is optional: without one, any JSON object.
                None if spec.is_object() => Ok(Some(Grammar::JsonObject)),
                None => Err(bad("response_format.json_schema must be an object")),
            }
        }
        Some(other) => Err(bad(&format!(
            "response_format type `{other}` is not supported (text, json_object, json_schema)"
        ))),
        None => Err(bad(
            "response_format needs a `type` (text, json_object, json_schema)",
        )),
    }
}

fn from_extension(g: &Value) -> Result<Grammar, ApiError> {
    let bad = |why: &str| ApiError::invalid(why.to_string(), Some("grammar"));
    let value = g.get("value").and_then(Value::as_str);
    match (g.get("type").and_then(Value::as_str), value) {
        (Some("lark"), Some(v)) => Ok(Grammar::Lark(v.to_string())),
        (Some("regex"), Some(v)) => Ok(Grammar::Regex(v.to_string())),
        (Some("json_schema"), _) => match g.get("value") {
            Some(s) if s.is_object() => Ok(Grammar::JsonSchema(s.clone())),
            _ => Err(bad("grammar json_schema needs `value`: a JSON object")),
        },
        (Some("lark" | "regex"), None) => Err(bad("grammar needs `value`: a string")),
        _ => Err(bad(
            "grammar must be {\"type\": \"lark\" | \"regex\" | \"json_schema\", \"value\": …}",
        )),
    }
}

/// The request field a grammar came from (for the 400 that a wrong one earns).
pub fn param(g: &Grammar) -> &'static str {
    match g {
        Grammar::JsonObject | Grammar::JsonSchema(_) => "response_format",
        Grammar::Lark(_) | Grammar::Regex(_) => "grammar",
    }
}

/// The worker's grammars over the served model's tokenizer, built at the first request that
/// needs them (the trie of a large vocabulary takes a moment; most servers never need it).
pub struct Formats<'a> {
    build: &'a dyn Fn() -> Result<Grammars, ConstraintError>,
    built: Option<Result<Grammars, String>>,
}

impl<'a> Formats<'a> {
    pub fn new(build: &'a dyn Fn() -> Result<Grammars, ConstraintError>) -> Self {
        Self { build, built: None }
    }

    /// The grammars over the model's tokenizer, built at the first call, or the error (naming
    /// the request field `param`) that says why there are none.
    fn grammars(&mut self, param: &'static str) -> Result<&Grammars, ApiError> {
        let build = self.build;
        self.built
            .get_or_insert_with(|| build().map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|why| {
                ApiError::invalid(
                    format!("this model cannot follow a grammar: {why}"),
                    Some(param),
                )
            })
    }

    /// The constraint for one output following `g`, or the error (naming the request field
    /// `param`) that says why there is none.
    pub fn constraint(
        &mut self,
        g: &Grammar,
        param: &'static str,
    ) -> Result<crate::constrain::Constraint, ApiError> {
        let grammars = self.grammars(param)?;
        compile(grammars, g, param)
    }

    /// The constraint of a forced tool call: `force`'s grammar of the calls `forced` allows, its
    /// fixed text spelled over this model's tokenizer.
    pub fn forced_call(
        &mut self,
        force: ForceCall,
        forced: &Forced<'_>,
    ) -> Result<crate::constrain::Constraint, ApiError> {
        let grammars = self.grammars("tool_choice")?;
        let lark = force(forced, &|text| grammars.lark_literal(text));
        compile(grammars, &Grammar::Lark(lark), "tools")
    }
}

/// `g` compiled into a constraint, or the error naming the request field `param`.
fn compile(
    grammars: &Grammars,
    g: &Grammar,
    param: &'static str,
) -> Result<crate::constrain::Constraint, ApiError> {
    grammars.constraint(g).map_err(|e| match e {
        ConstraintError::Grammar(why) => ApiError::invalid(
            format!("the {param} cannot be compiled: {why}"),
            Some(param),
        ),
        other => ApiError::server(other.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refused(f: Option<Value>, g: Option<Value>, param: &str) {
        match grammar(f.as_ref(), g.as_ref()) {
            Err(e) => assert!(e.body().to_string().contains(param), "{:?}", e.body()),
            Ok(x) => panic!("accepted: {x:?}"),
        }
    }

    #[test]
    fn each_form_reads_into_its_grammar() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        let cases = [
            (Some(json!({"type": "text"})), None, None),
            (
                Some(json!({"type": "json_object"})),
                None,
                Some(Grammar::JsonObject),
            ),
            (
                Some(
                    json!({"type": "json_schema", "json_schema": {"name": "n", "strict": true, "schema": schema}}),
                ),
                None,
                Some(Grammar::JsonSchema(schema.clone())),
            ),
            (
                Some(json!({"type": "json_schema", "json_schema": {"name": "n"}})),
                None,
                Some(Grammar::JsonObject),
            ),
            (
                None,
                Some(json!({"type": "regex", "value": "[0-9]+"})),
                Some(Grammar::Regex("[0-9]+".into())),
            ),
            (
                Some(json!({"type": "text"})),
                Some(json!({"type": "lark", "value": "start: \"a\""})),
                Some(Grammar::Lark("start: \"a\"".into())),
            ),
            (None, Some(Value::Null), None),
        ];
        for (f, g, want) in cases {
            let got = grammar(f.as_ref(), g.as_ref()).map_err(|e| e.body());
            assert_eq!(got.ok(), Some(want), "{f:?} {g:?}");
        }
    }

    #[test]
    fn malformed_and_contradictory_forms_are_refused() {
        refused(Some(json!({"type": "yaml"})), None, "response_format");
        refused(Some(json!({})), None, "response_format");
        refused(
            Some(json!({"type": "json_schema"})),
            None,
            "response_format",
        );
        refused(
            Some(json!({"type": "json_schema", "json_schema": {"schema": [1]}})),
            None,
            "response_format",
        );
        refused(None, Some(json!({"type": "gbnf", "value": "x"})), "grammar");
        refused(None, Some(json!({"type": "lark"})), "grammar");
        refused(
            Some(json!({"type": "json_object"})),
            Some(json!({"type": "regex", "value": "a"})),
            "grammar",
        );
    }
}
