//! Internals for `tests/loom_join.rs` (only under `--cfg loom`; not API).
#![allow(missing_docs, missing_debug_implementations, unreachable_pub, clippy::missing_safety_doc)]

use core::ptr::NonNull;

use crate::task::Task;

/// Slots in a join deque under loom (4).
pub const DEQUE_CAPACITY: u32 = crate::queue::deque::CAPACITY;

/// A worker's join deque (`queue::deque::JoinDeque`).
#[derive(Debug, Default)]
pub struct JoinDeque(crate::queue::deque::JoinDeque);

impl JoinDeque {
    pub fn new() -> Self {
        Self(crate::queue::deque::JoinDeque::new())
    }
    /// # Safety
    /// Called on the deque's owner thread only (`JoinDeque::owner`).
    pub unsafe fn push(&self, task: NonNull<Task>) -> bool {
        // SAFETY: the owner's thread (the caller's contract); the deque outlives the half.
        unsafe { self.0.owner() }.push(task)
    }
    /// # Safety
    /// As `push`.
    pub unsafe fn pop_if(&self, task: NonNull<Task>) -> bool {
        // SAFETY: the owner's thread (the caller's contract); the deque outlives the half.
        unsafe { self.0.owner() }.pop_if(task)
    }
    /// # Safety
    /// As `push`.
    pub unsafe fn pop(&self) -> Option<NonNull<Task>> {
        // SAFETY: the owner's thread (the caller's contract); the deque outlives the half.
        unsafe { self.0.owner() }.pop()
    }
    pub fn steal(&self) -> Option<NonNull<Task>> {
        self.0.steal()
    }
}

/// Latent frames a worker keeps before its joins stop recording (`frame::LATENT_SUPPLY`).
pub const LATENT_SUPPLY: usize = crate::scheduler::frame::LATENT_SUPPLY;

/// A worker's demand word (`scheduler::frame::Demand`): the hungry and record flags.
#[derive(Debug)]
pub struct Demand(crate::scheduler::frame::Demand);

impl Demand {
    pub fn new() -> Self {
        Self(crate::scheduler::frame::Demand::new())
    }
    /// An idle worker's request.
    pub fn ask(&self) {
        self.0.ask();
    }
    pub fn is_hungry(&self) -> bool {
        self.0.is_hungry()
    }
    /// The owner's join test.
    pub fn must_record(&self) -> bool {
        self.0.must_record()
    }
    /// The owner offered work.
    pub fn lower_hunger(&self) {
        self.0.lower_hunger();
    }
}

/// A worker's frame stack (`scheduler::frame::FrameStack`) over `demand`, for the owner thread.
pub struct Frames<'a> {
    stack: crate::scheduler::frame::FrameStack,
    _demand: core::marker::PhantomData<&'a Demand>,
}

impl<'a> Frames<'a> {
    pub fn new(demand: &'a Demand) -> Self {
        // SAFETY: `demand` outlives `'a`, and so this stack.
        Self { stack: unsafe { crate::scheduler::frame::FrameStack::new(NonNull::from(&demand.0)) }, _demand: core::marker::PhantomData }
    }
    /// A join records `task` as its newest latent frame.
    pub fn push(&self, task: NonNull<Task>) {
        self.stack.push(self.stack.depth(), task);
    }
    /// The owner promotes its oldest latent frame (as `WorkerContext::promote`, without the
    /// join deque).
    pub fn promote_oldest(&self) {
        self.stack.mark_oldest_promoted();
    }
    pub fn latent(&self) -> usize {
        self.stack.latent()
    }
}

/// The stack job `join` builds for its second closure (`join::StackJob`), run without a
/// worker context (the models run it on plain loom threads).
pub struct StackJob<R>(super::stack_job::StackJob<Body<R>, R, crate::loom_support::LoomSpawner>);

type Body<R> = alloc::boxed::Box<dyn FnOnce(Option<&crate::WorkerContext<crate::loom_support::LoomSpawner>>) -> R + Send>;

impl<R: Send + 'static> StackJob<R> {
    pub fn new(f: impl FnOnce() -> R + Send + 'static) -> Self {
        let body: Body<R> = alloc::boxed::Box::new(move |_| f());
        Self(super::stack_job::StackJob::new(body, core::ptr::null()))
    }
    pub fn task(&self) -> NonNull<Task> {
        self.0.task()
    }
    pub fn signal(&self) -> &crate::Signal {
        // SAFETY: `new` offered it.
        unsafe { self.0.signal() }
    }
    /// # Safety
    /// As `StackJob::run_inline`.
    pub unsafe fn run_inline(self) -> R {
        // SAFETY: forwarded contract.
        unsafe { self.0.run_inline(None) }
    }
    /// # Safety
    /// As `StackJob::into_result`.
    pub unsafe fn into_result(self) -> R {
        // SAFETY: forwarded contract.
        unsafe { self.0.into_result() }
    }
}
