/* Board support for PlatformIO's stm32cube framework (NUCLEO-F767ZI, STM32F746G-DISCO,
 * NUCLEO-F412ZG): HAL tick, the part's nominal clock from the 16 MHz HSI (exact whatever crystal
 * or ST-LINK MCO the board has), the ST-LINK virtual COM port, DWT cycles, stack paint.
 *
 * The board's figures arrive as defines from msf-pio's board data (msf_pio/pio/boards.yaml):
 * MSF_STM32_HAL (the family's HAL header), MSF_PLL_M/N/P/Q, MSF_FLASH_LATENCY, MSF_APB1_DIV,
 * MSF_APB2_DIV, MSF_OVERDRIVE, MSF_CONSOLE_USART, MSF_CONSOLE_TX/RX_PORT/PIN, MSF_CONSOLE_AF and
 * MSF_CONSOLE_BAUD (the env's monitor_speed). */
#if defined(MSF_FRAMEWORK_STM32CUBE)
#include <string.h>

#include "msf/board.h"
#include MSF_STM32_HAL

#define CAT3_(a, b, c) a##b##c
#define CAT3(a, b, c) CAT3_(a, b, c)
#define CONSOLE CAT3(USART, MSF_CONSOLE_USART, )
#define GPIO_OF(port) CAT3(GPIO, port, )
#define GPIO_CLK_ENABLE(port) CAT3(__HAL_RCC_GPIO, port, _CLK_ENABLE)()
#define PAINT 0xA5C35A3Cu
#define PAINT_MARGIN 256u   /* bytes left unpainted below the painter's own frame */
#define REPORT_PERIOD_MS 2000u

/* ST's linker scripts: the stack grows down from _estack over what .bss and the newlib heap
 * (_Min_Heap_Size above _end) leave free. Only their addresses are used. */
extern char _end[], _estack[], _Min_Heap_Size[];

static UART_HandleTypeDef console;
static int use_dwt;
static uint32_t cycles_last, cycles_high;

void SysTick_Handler(void);
void SysTick_Handler(void)
{
    HAL_IncTick();
}

/* The part's nominal clock from HSI through the PLL. Under an emulator without a clock tree
 * model (QEMU) the PLL never locks: the part then runs on at HSI, and SystemCoreClock says so. */
static void clock_init(void)
{
    RCC_OscInitTypeDef osc = {0};
    RCC_ClkInitTypeDef clk = {0};
    __HAL_RCC_PWR_CLK_ENABLE();
    __HAL_PWR_VOLTAGESCALING_CONFIG(PWR_REGULATOR_VOLTAGE_SCALE1);
    osc.OscillatorType = RCC_OSCILLATORTYPE_HSI;
    osc.HSIState = RCC_HSI_ON;
    osc.HSICalibrationValue = RCC_HSICALIBRATION_DEFAULT;
    osc.PLL.PLLState = RCC_PLL_ON;
    osc.PLL.PLLSource = RCC_PLLSOURCE_HSI;
    osc.PLL.PLLM = MSF_PLL_M;
    osc.PLL.PLLN = MSF_PLL_N;
    osc.PLL.PLLP = MSF_PLL_P;
    osc.PLL.PLLQ = MSF_PLL_Q;
#if defined(RCC_PLLCFGR_PLLR)
    osc.PLL.PLLR = 2;
#endif
    if (HAL_RCC_OscConfig(&osc) == HAL_OK) {
#if MSF_OVERDRIVE
        (void)HAL_PWREx_EnableOverDrive();   /* F7 above 180 MHz */
#endif
        clk.ClockType = RCC_CLOCKTYPE_HCLK | RCC_CLOCKTYPE_SYSCLK | RCC_CLOCKTYPE_PCLK1 |
                        RCC_CLOCKTYPE_PCLK2;
        clk.SYSCLKSource = RCC_SYSCLKSOURCE_PLLCLK;
        clk.AHBCLKDivider = RCC_SYSCLK_DIV1;
        clk.APB1CLKDivider = CAT3(RCC_HCLK_DIV, MSF_APB1_DIV, );
        clk.APB2CLKDivider = CAT3(RCC_HCLK_DIV, MSF_APB2_DIV, );
        (void)HAL_RCC_ClockConfig(&clk, CAT3(FLASH_LATENCY_, MSF_FLASH_LATENCY, ));
    }
    SystemCoreClockUpdate();
}

static void console_init(void)
{
    GPIO_InitTypeDef pin = {0};
    GPIO_CLK_ENABLE(MSF_CONSOLE_TX_PORT);
    GPIO_CLK_ENABLE(MSF_CONSOLE_RX_PORT);
    CAT3(__HAL_RCC_USART, MSF_CONSOLE_USART, _CLK_ENABLE)();
    pin.Mode = GPIO_MODE_AF_PP;
    pin.Pull = GPIO_PULLUP;
    pin.Speed = GPIO_SPEED_FREQ_VERY_HIGH;
    pin.Alternate = MSF_CONSOLE_AF;
    pin.Pin = 1u << MSF_CONSOLE_TX_PIN;
    HAL_GPIO_Init(GPIO_OF(MSF_CONSOLE_TX_PORT), &pin);
    pin.Pin = 1u << MSF_CONSOLE_RX_PIN;
    HAL_GPIO_Init(GPIO_OF(MSF_CONSOLE_RX_PORT), &pin);
    console.Instance = CONSOLE;
    console.Init.BaudRate = MSF_CONSOLE_BAUD;
    console.Init.WordLength = UART_WORDLENGTH_8B;
    console.Init.StopBits = UART_STOPBITS_1;
    console.Init.Parity = UART_PARITY_NONE;
    console.Init.Mode = UART_MODE_TX_RX;
    console.Init.HwFlowCtl = UART_HWCONTROL_NONE;
    console.Init.OverSampling = UART_OVERSAMPLING_16;
    (void)HAL_UART_Init(&console);
}

/* DWT->CYCCNT; the Cortex-M7's DWT is locked until its lock access register is written. An
 * emulator without a DWT leaves it at 0: then the HAL's 1 ms tick and SysTick's down counter. */
static void cycles_init(void)
{
    CoreDebug->DEMCR |= CoreDebug_DEMCR_TRCENA_Msk;
#if (__CORTEX_M == 7U)
    DWT->LAR = 0xC5ACCE55u;
#endif
    DWT->CYCCNT = 0u;
    DWT->CTRL |= DWT_CTRL_CYCCNTENA_Msk;
    for (volatile int i = 0; i < 16; i++) {
    }
    use_dwt = DWT->CYCCNT != 0u;
}

/* Paints from the top of the heap reservation to just below this frame, through integer
 * addresses: the stack is no C object. */
static void stack_paint(void)
{
    uintptr_t lo = (uintptr_t)_end + (uintptr_t)_Min_Heap_Size;
    uintptr_t hi = ((uintptr_t)__builtin_frame_address(0) - PAINT_MARGIN) & ~(uintptr_t)3u;
    for (uintptr_t a = (lo + 3u) & ~(uintptr_t)3u; a < hi; a += 4u) {
        *(volatile uint32_t *)a = PAINT;
    }
}

void msf_board_init(void)
{
    stack_paint();
    (void)HAL_Init();
    clock_init();
#if defined(__ICACHE_PRESENT) && (__ICACHE_PRESENT == 1U)
    SCB_EnableICache();
    SCB_EnableDCache();
#endif
    console_init();
    cycles_init();
}

void msf_board_puts(const char *s)
{
    for (const char *p = s; *p; p++) {
        if (*p == '\n') {
            (void)HAL_UART_Transmit(&console, (uint8_t *)"\r", 1u, HAL_MAX_DELAY);
        }
        (void)HAL_UART_Transmit(&console, (uint8_t *)p, 1u, HAL_MAX_DELAY);
    }
}

/* newlib's write(): printf and friends reach the console too. */
int _write(int fd, const char *buf, int len);
int _write(int fd, const char *buf, int len)
{
    (void)fd;
    (void)HAL_UART_Transmit(&console, (uint8_t *)buf, (uint16_t)len, HAL_MAX_DELAY);
    return len;
}

uint64_t msf_board_cycles(void)
{
    uint32_t now;
    if (use_dwt) {
        now = DWT->CYCCNT;
    } else {
        uint32_t tick, val;
        do {   /* re-read if the tick interrupt landed between the two reads */
            tick = HAL_GetTick();
            val = SysTick->VAL;
        } while (tick != HAL_GetTick());
        now = tick * (SysTick->LOAD + 1u) + (SysTick->LOAD - val);
    }
    cycles_high += now < cycles_last;   /* 32-bit counter: read at least once per wrap */
    cycles_last = now;
    return ((uint64_t)cycles_high << 32) | now;
}

const char *msf_board_cycles_source(void)
{
    return use_dwt ? "dwt" : "systick";
}

uint32_t msf_board_cpu_hz(void)
{
    return SystemCoreClock;
}

size_t msf_board_stack_size(void)
{
    return (size_t)((uintptr_t)_estack - ((uintptr_t)_end + (uintptr_t)_Min_Heap_Size));
}

size_t msf_board_stack_used(void)
{
    uintptr_t lo = ((uintptr_t)_end + (uintptr_t)_Min_Heap_Size + 3u) & ~(uintptr_t)3u;
    uintptr_t a = lo;
    while (a < (uintptr_t)_estack && *(volatile const uint32_t *)a == PAINT) {
        a += 4u;
    }
    return (size_t)((uintptr_t)_estack - a);
}

void msf_board_end_of_run(int status)
{
    (void)status;
    HAL_Delay(REPORT_PERIOD_MS);
}

/* A fault prints where it happened instead of hanging silently. */
__attribute__((used)) static void report_fault(const uint32_t *frame)
{
    static const char hex[] = "0123456789abcdef";
    char text[] = "\nMSF fault=hardfault cfsr=0x00000000 pc=0x00000000\n";
    uint32_t values[2] = {SCB->CFSR, frame[6]};
    for (int v = 0; v < 2; v++) {
        char *digits = strstr(text, v ? "pc=0x" : "cfsr=0x") + (v ? 5 : 7);
        for (int i = 0; i < 8; i++) {
            digits[i] = hex[(values[v] >> (28 - 4 * i)) & 0xFu];
        }
    }
    msf_board_puts(text);
    for (;;) {
    }
}

void HardFault_Handler(void);
__attribute__((naked)) void HardFault_Handler(void)
{
    __asm__ volatile("tst lr, #4\n\tite eq\n\tmrseq r0, msp\n\tmrsne r0, psp\n\tb report_fault");
}
#endif /* MSF_FRAMEWORK_STM32CUBE */
