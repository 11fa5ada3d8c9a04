//! Running an interactive request: the program and the interactor as two
//! runs of one client, joined case by case (see [`crate::conversation`]).

use crate::client::{RunProfile, RunRequest, SandboxClient, SandboxError};
use crate::conversation::{Conversation, ConversationSide};
use crate::run::{Interaction, InvocationEvent, ProgramRun, Side};

/// Runs an interactive request (`request.interactor` set): the program and
/// the interactor as two runs of `client` joined case by case; the
/// program's run with the interactor's run and the transcripts in its
/// [`ProgramRun::interaction`]. `Err` when either side was refused.
pub async fn converse<C: SandboxClient + ?Sized>(
    client: &C,
    request: RunRequest<'_>,
) -> Result<ProgramRun, SandboxError> {
    let Some(interactor) = request.interactor else {
        return client.run(request).await;
    };
    let cases = request.invocations.len();
    if interactor.invocations.len() != cases {
        return Err(SandboxError::Setup {
            message: format!(
                "an interactive run needs one interactor invocation per case: {} cases, {} interactor invocations",
                cases,
                interactor.invocations.len()
            ),
        });
    }
    let conversation = Conversation::new(cases);
    let interactor_profile = match interactor.profile {
        RunProfile::Named(name) => name.to_string(),
        RunProfile::Variant(variant) => variant.name.clone(),
    };
    let program_request = RunRequest {
        interactor: None,
        // A case's event alone decides nothing in a conversation.
        on_case: None,
        conversation: Some(ConversationSide::new(conversation.clone(), Side::Program)),
        ..request
    };
    let interactor_request = RunRequest {
        program: interactor.program,
        profile: interactor.profile,
        files: interactor.files,
        invocations: interactor.invocations,
        on_case: None,
        interactor: None,
        conversation: Some(ConversationSide::new(
            conversation.clone(),
            Side::Interactor,
        )),
    };
    let program_side = async {
        let run = client.run(program_request).await;
        conversation.finish(Side::Program);
        run
    };
    let interactor_side = async {
        // Started once the program has its place: never a pair holding
        // the capacity its other half waits for.
        let run = if conversation.placed_or_finished(Side::Program).await {
            Some(client.run(interactor_request).await)
        } else {
            None
        };
        conversation.finish(Side::Interactor);
        run
    };
    let (program_run, interactor_run) = tokio::join!(program_side, interactor_side);
    let transcripts = conversation.transcripts();
    let mut run = program_run?;
    let interactor_run = match interactor_run {
        Some(run) => run?,
        // The program never had a place: its run says why.
        None => ProgramRun {
            profile: interactor_profile,
            program_sha256: crate::canonical::sha256_hex(interactor.program),
            events: interactor
                .invocations
                .iter()
                .map(|_| InvocationEvent::not_run("the program's run never had a place"))
                .collect(),
            sandbox_warnings: Vec::new(),
            compile: None,
            interaction: None,
        },
    };
    run.interaction = Some(Box::new(Interaction {
        interactor: interactor_run,
        transcripts,
    }));
    Ok(run)
}
