/*
 * The accelerator probe of vmtest (accel.go): a 64 KiB "BIOS" image for qemu -bios.
 * From the reset vector it switches straight from real mode to long mode (identity-mapped
 * 2 MiB pages for the first 8 MiB), prints 'S' on the first serial port, runs 10 million
 * iterations of a loop, prints 'C', writes 4 MiB of memory, prints 'K' and halts.
 *
 * Why this much: on a nested host /dev/kvm opens, and a KVM guest runs real-mode code and
 * even enters long mode, but then makes no progress at all (a Linux kernel never prints its
 * first line). A guest that prints 'K' within the probe's timeout has really run code.
 *
 * accel.go carries the assembled bytes; TestProbeSource checks that they match this file:
 *   as --64 -o probe.o probe.S && ld -m elf_x86_64 -e 0 -Ttext=0 --oformat binary -o probe.bin probe.o
 */
	.code16
	.org 0
start:
	cli
	xorw %ax, %ax
	movw %ax, %ds
	movw %ax, %es
	/* page tables at 0x1000 (PML4), 0x2000 (PDPT), 0x3000 (PD), zeroed first */
	movw $0x1000, %di
	movw $0x0c00, %cx
	xorl %eax, %eax
	rep stosl
	movl $0x2003, 0x1000
	movl $0x3003, 0x2000
	movl $0x000083, 0x3000
	movl $0x200083, 0x3008
	movl $0x400083, 0x3010
	movl $0x600083, 0x3018
	lgdtl %cs:gdtr
	movl %cr4, %eax
	orl $0x20, %eax			/* PAE */
	movl %eax, %cr4
	movl $0x1000, %eax
	movl %eax, %cr3
	movl $0xc0000080, %ecx		/* EFER.LME */
	rdmsr
	orl $0x100, %eax
	wrmsr
	movl %cr0, %eax
	orl $0x80000001, %eax		/* PG | PE */
	movl %eax, %cr0
	ljmpl $0x08, $(0xf0000 + long)	/* the image is mapped at 0xf0000 */
	.code64
long:
	movw $0x3f8, %dx
	movb $'S', %al
	outb %al, %dx
	movl $10000000, %ecx
2:	decl %ecx
	jnz 2b
	movb $'C', %al
	outb %al, %dx
	movl $1, %ebx
3:	movq $0x100000, %rdi
	movq $0x80000, %rcx
	movq %rbx, %rax
	rep stosq
	decl %ebx
	jnz 3b
	movb $'K', %al
	outb %al, %dx
1:	hlt
	jmp 1b
	.p2align 3
gdt:
	.quad 0
	.quad 0x00209b0000000000	/* 64-bit code segment, accessed bit preset (ROM) */
gdtr:
	.word 15
	.long 0xf0000 + gdt
	.code16
	.org 0xfff0			/* reset vector: f000:fff0 */
	ljmp $0xf000, $start
	.org 0x10000
