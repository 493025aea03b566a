//! The JSON door to the tools: a wire name and JSON arguments in, the tool's JSON result out (what MCP and HTTP
//! surfaces call).

use super::*;

impl Shellward {
    /// Runs a tool by wire name with JSON arguments and returns its JSON result (what MCP and HTTP surfaces call).
    /// Arguments that do not match the tool's schema are an [`ToolErrorKind::InvalidArguments`] error naming the
    /// expected shape.
    pub async fn call(
        &self,
        session: Option<&str>,
        tool: &str,
        arguments: Value,
    ) -> Result<Value, ToolError> {
        let Some(name) = ToolName::parse(tool) else {
            return Err(ToolError {
                kind: ToolErrorKind::UnknownTool,
                message: format!(
                    "unknown tool {tool:?}; the tools are execute, process_output, process_input, \
                     process_list and process_signal"
                ),
            });
        };
        // A missing arguments object is an empty one (process_list takes none).
        let arguments = if arguments.is_null() {
            Value::Object(Default::default())
        } else {
            arguments
        };
        fn parse<T: serde::de::DeserializeOwned>(name: ToolName, v: Value) -> Result<T, ToolError> {
            serde_json::from_value(v).map_err(|e| {
                ToolError::invalid(format!(
                    "invalid arguments for {name}: {e}; expected {}",
                    name.usage()
                ))
            })
        }
        fn to_json<T: serde::Serialize>(v: T) -> Result<Value, ToolError> {
            serde_json::to_value(v).map_err(|e| ToolError {
                kind: ToolErrorKind::Internal,
                message: format!("could not encode the result: {e}"),
            })
        }
        match name {
            ToolName::Execute => to_json(self.execute(session, parse(name, arguments)?).await?),
            ToolName::ProcessOutput => to_json(
                self.process_output(session, parse(name, arguments)?)
                    .await?,
            ),
            ToolName::ProcessList => {
                to_json(self.process_list(session, parse(name, arguments)?).await?)
            }
            ToolName::ProcessSignal => to_json(
                self.process_signal(session, parse(name, arguments)?)
                    .await?,
            ),
            ToolName::ProcessInput => {
                to_json(self.process_input(session, parse(name, arguments)?).await?)
            }
        }
    }
}
