"""The scripts' answers as TypedDicts, made from references/schemas/ by dev/gen_answer_types.py."""

from .common import (
    AnswerCut, Checkpoint, ErrorObject, Hint, InputStaged, InstanceStarted, LogsCut, Results,
    ResultsLinksItem, ResumeFrom,
)
from .cost import CostFacts, CostFactsBilledParts
from .error import ErrorAnswer
from .teardown import (
    Orphan, OrphanDeletePending, StopFacts, TeardownAnswer, TeardownAnswerBundleStartedInstance,
    TeardownAnswerKeptItem, TeardownAnswerResultsSavedItem,
)
from .submit import SubmitAnswer, SubmitAnswerFindingsItem, SubmitAnswerPlanItem, SubmitAnswerSpecCheck
from .preflight import Check, PreflightAnswer, PreflightAnswerRoundTrips
from .poll_status import (
    KpiPoint, Metrics, MetricsBestValue, MetricsEpochsItem, PollAnswer, PollAnswerAttemptsItem,
    PollAnswerAttemptsItemCause, PollAnswerAttemptsItemResumedFrom, PollAnswerBundleStartedInstance,
    PollAnswerChainCost, PollAnswerJobsItem, PollAnswerObserved, PollAnswerQuarantinedItem,
    PollAnswerRecovery, PollAnswerStallTeardown, PollAnswerStallTeardownResults, PollAnswerWithheld, Progress,
    Stall,
)
from .job_record import RecordDocument, RecordDocumentInstanceCopy, RecordDocumentTransitionsItem

__all__ = ['AnswerCut', 'Check', 'Checkpoint', 'CostFacts', 'CostFactsBilledParts', 'ErrorAnswer', 'ErrorObject', 'Hint', 'InputStaged', 'InstanceStarted', 'KpiPoint', 'LogsCut', 'Metrics', 'MetricsBestValue', 'MetricsEpochsItem', 'Orphan', 'OrphanDeletePending', 'PollAnswer', 'PollAnswerAttemptsItem', 'PollAnswerAttemptsItemCause', 'PollAnswerAttemptsItemResumedFrom', 'PollAnswerBundleStartedInstance', 'PollAnswerChainCost', 'PollAnswerJobsItem', 'PollAnswerObserved', 'PollAnswerQuarantinedItem', 'PollAnswerRecovery', 'PollAnswerStallTeardown', 'PollAnswerStallTeardownResults', 'PollAnswerWithheld', 'PreflightAnswer', 'PreflightAnswerRoundTrips', 'Progress', 'RecordDocument', 'RecordDocumentInstanceCopy', 'RecordDocumentTransitionsItem', 'Results', 'ResultsLinksItem', 'ResumeFrom', 'Stall', 'StopFacts', 'SubmitAnswer', 'SubmitAnswerFindingsItem', 'SubmitAnswerPlanItem', 'SubmitAnswerSpecCheck', 'TeardownAnswer', 'TeardownAnswerBundleStartedInstance', 'TeardownAnswerKeptItem', 'TeardownAnswerResultsSavedItem']
