// The view is a shared contract (the notifier sends it too); it lives in @pipeline/shared/tasks.
export { toTaskView, WAITABLE_DONE } from "@pipeline/shared/tasks";
